/*
 * txn_remote.c - KIP-890 checks asked of another broker's coordinator;
 * see txn_remote.h.
 */
#include "node/txn_remote.h"

void cn_txn_remote_stop(struct cn_broker *b)
{
    (void)b;
}
