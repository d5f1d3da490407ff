package cairn.tests;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Read-process-write, the seed document's loop: a consumer in GROUP reads
 * IN (one partition, COUNT records already there), a transactional
 * producer writes each value upper-cased to OUT and commits the input
 * offsets with sendOffsetsToTransaction(offsets, consumer.groupMetadata()).
 * The first transaction is aborted and its input replayed from the
 * group's committed offset, as the seeds' retryable-error path does.
 *
 *   ReadProcessWrite BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID COUNT
 */
public final class ReadProcessWrite {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], tid = args[4];
        int count = Integer.parseInt(args[5]);
        TopicPartition inTp = new TopicPartition(in, 0);
        Properties cp = Common.consumerProps(bootstrap, "read_committed");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        int processed = 0, transactions = 0, aborted = 0;
        long deadline = System.nanoTime() + Common.WAIT.toNanos() * 2;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = Common.txnProducer(bootstrap, tid)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            while (processed < count) {
                if (System.nanoTime() > deadline)
                    throw new IllegalStateException("processed only " + processed);
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty())
                    continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(out, 0, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (transactions++ == 0) {
                    // Sent first, so the aborted records really sit in the
                    // log for read_uncommitted readers: an abort drops what
                    // the producer has not sent yet, and whether it has is
                    // up to timing.
                    producer.flush();
                    producer.abortTransaction();
                    aborted += records.count();
                    // Replay from what the group committed (nothing yet).
                    OffsetAndMetadata c = consumer.committed(java.util.Set.of(inTp)).get(inTp);
                    consumer.seek(inTp, c == null ? 0 : c.offset());
                    continue;
                }
                producer.commitTransaction();
                processed += records.count();
            }
        }
        long committed;
        try (Admin admin = Common.admin(bootstrap)) {
            committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get(30, TimeUnit.SECONDS).get(inTp).offset();
        }
        TopicPartition outTp = new TopicPartition(out, 0);
        Common.print(Json.obj("processed", processed, "transactions", transactions,
                              "aborted_records", aborted, "committed_offset", committed,
                              "read_committed", Common.readAll(bootstrap, "read_committed", List.of(outTp)),
                              "read_uncommitted", Common.readAll(bootstrap, "read_uncommitted", List.of(outTp))));
    }
}
