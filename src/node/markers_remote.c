/*
 * markers_remote.c - the marker channel's remote side: WriteTxnMarkers to
 * other brokers' partition leaders; see markers.h.
 */
#include "node/markers.h"

void cn_markers_remote_stop(struct cn_broker *b)
{
    (void)b;
}
