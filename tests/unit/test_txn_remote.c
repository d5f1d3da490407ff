/*
 * test_txn_remote.c - the pure decisions of the KIP-890 checks asked of
 * another broker's coordinator (node/txn_remote.h): which produce batches
 * need the coordinator's word, and how its answers reach the producer
 * (Kafka's AddPartitionsToTxnManager and ReplicaManager mappings).
 */
#include "node/txn_remote.h"
#include "proto/kerr.h"
#include "unit.h"

static struct cn_batch_hdr hdr_of(int64_t pid, int16_t epoch, bool txn)
{
    struct cn_batch_hdr h = {0};
    h.magic = 2;
    h.producer_id = pid;
    h.producer_epoch = epoch;
    h.attributes = txn ? CN_BATCH_ATTR_TRANSACTIONAL : 0;
    return h;
}

static struct cn_pentry_info entry_of(int64_t pid, int16_t epoch,
                                      int64_t txn_first)
{
    struct cn_pentry_info e = {0};
    e.producer_id = pid;
    e.epoch = epoch;
    e.txn_first_offset = txn_first;
    e.last_sequence = -1;
    e.last_offset = -1;
    e.coordinator_epoch = -1;
    return e;
}

UNIT_TEST(only_unopened_transactional_batches_are_checked)
{
    struct cn_batch_hdr plain = hdr_of(-1, -1, false);
    struct cn_batch_hdr idem = hdr_of(7, 0, false);
    struct cn_batch_hdr txn = hdr_of(7, 3, true);
    /* Neither a plain nor an idempotent batch asks the coordinator. */
    CHECK(!cn_txn_remote_batch_needs_check(&plain, NULL));
    CHECK(!cn_txn_remote_batch_needs_check(&idem, NULL));
    /* A producer unknown here: its first transactional batch. */
    CHECK(cn_txn_remote_batch_needs_check(&txn, NULL));
    /* Known, but no transaction open here (the last one ended). */
    struct cn_pentry_info closed = entry_of(7, 3, -1);
    CHECK(cn_txn_remote_batch_needs_check(&txn, &closed));
    /* Open at this epoch: part of it, nothing to ask (append.c's test). */
    struct cn_pentry_info open = entry_of(7, 3, 100);
    CHECK(!cn_txn_remote_batch_needs_check(&txn, &open));
    /* Open at another epoch: the new epoch's batch is not part of it. */
    struct cn_pentry_info older = entry_of(7, 2, 100);
    CHECK(cn_txn_remote_batch_needs_check(&txn, &older));
    /* Another producer's entry says nothing about this one. */
    struct cn_pentry_info other = entry_of(8, 3, 100);
    CHECK(cn_txn_remote_batch_needs_check(&txn, &other));
}

UNIT_TEST(coordinator_answers_mapped_as_kafkas_manager)
{
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_NONE, true), KAFKA_NONE);
    /* Producers expect INVALID_PRODUCER_EPOCH for a fenced epoch. */
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_PRODUCER_FENCED, false),
             KAFKA_INVALID_PRODUCER_EPOCH);
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_PRODUCER_FENCED, true),
             KAFKA_INVALID_PRODUCER_EPOCH);
    /* TRANSACTION_ABORTABLE only for clients that know it. */
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_TRANSACTION_ABORTABLE, true),
             KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_TRANSACTION_ABORTABLE, false),
             KAFKA_TRANSACTION_ABORTABLE);
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_INVALID_TXN_STATE, true),
             KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(cn_txn_remote_coord_error(KAFKA_INVALID_PRODUCER_ID_MAPPING,
                                       true),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
}

UNIT_TEST(produce_answers_retriable_coordinator_errors_as_not_enough_replicas)
{
    int16_t retriable[] = {KAFKA_NETWORK_EXCEPTION,
                           KAFKA_COORDINATOR_LOAD_IN_PROGRESS,
                           KAFKA_COORDINATOR_NOT_AVAILABLE,
                           KAFKA_NOT_COORDINATOR};
    for (size_t i = 0; i < sizeof retriable / sizeof retriable[0]; i++) {
        CHECK_EQ(cn_txn_remote_produce_error(retriable[i], false),
                 KAFKA_NOT_ENOUGH_REPLICAS);
        CHECK_EQ(cn_txn_remote_produce_error(retriable[i], true),
                 KAFKA_NOT_ENOUGH_REPLICAS);
    }
    /* CONCURRENT_TRANSACTIONS stays for a TV2 add (Kafka 4.x). */
    CHECK_EQ(cn_txn_remote_produce_error(KAFKA_CONCURRENT_TRANSACTIONS, false),
             KAFKA_NOT_ENOUGH_REPLICAS);
    CHECK_EQ(cn_txn_remote_produce_error(KAFKA_CONCURRENT_TRANSACTIONS, true),
             KAFKA_CONCURRENT_TRANSACTIONS);
    /* The verdicts pass as they are. */
    CHECK_EQ(cn_txn_remote_produce_error(KAFKA_NONE, false), KAFKA_NONE);
    CHECK_EQ(cn_txn_remote_produce_error(KAFKA_INVALID_TXN_STATE, false),
             KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(cn_txn_remote_produce_error(KAFKA_INVALID_PRODUCER_EPOCH, true),
             KAFKA_INVALID_PRODUCER_EPOCH);
    CHECK_EQ(cn_txn_remote_produce_error(KAFKA_INVALID_PRODUCER_ID_MAPPING,
                                         false),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
}

UNIT_MAIN(only_unopened_transactional_batches_are_checked,
          coordinator_answers_mapped_as_kafkas_manager,
          produce_answers_retriable_coordinator_errors_as_not_enough_replicas)
