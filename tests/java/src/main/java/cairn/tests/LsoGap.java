package cairn.tests;

import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The seed document's LSO-gap probe, as written there, measured while a
 * transaction is open on partition 0 of TOPIC (two partitions) and after
 * it commits.  Partition 0 gets two plain records, then three in the open
 * transaction; partition 1 one plain record.
 *
 *   LsoGap BOOTSTRAP TOPIC TRANSACTIONAL_ID
 */
public final class LsoGap {
    // Compare log end (high watermark) with the last stable offset for every partition of a topic.
    // endOffsets() returns the LSO when the consumer is configured read_committed.
    static Map<TopicPartition, Long> lsoGap(String bootstrap, String topic) {
        Properties base = new Properties();
        base.put("bootstrap.servers", bootstrap);
        base.put("key.deserializer", ByteArrayDeserializer.class.getName());
        base.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Properties committed = (Properties) base.clone();
        committed.put("isolation.level", "read_committed");

        try (var hw = new KafkaConsumer<byte[], byte[]>(base);
             var lso = new KafkaConsumer<byte[], byte[]>(committed)) {
            List<TopicPartition> parts = hw.partitionsFor(topic).stream()
                .map(pi -> new TopicPartition(topic, pi.partition())).toList();
            Map<TopicPartition, Long> high = hw.endOffsets(parts);
            Map<TopicPartition, Long> stable = lso.endOffsets(parts);
            Map<TopicPartition, Long> gap = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
            for (TopicPartition tp : parts) gap.put(tp, high.get(tp) - stable.get(tp));
            return gap;
        }
    }

    static Map<String, Object> asJson(Map<TopicPartition, Long> gap) {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> e : gap.entrySet())
            out.put(String.valueOf(e.getKey().partition()), e.getValue());
        return out;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        Map<String, Object> open, closed;
        try (KafkaProducer<String, String> plain = Common.producer(bootstrap);
             KafkaProducer<String, String> tx = Common.txnProducer(bootstrap, tid)) {
            plain.send(new ProducerRecord<>(topic, 0, "p", "plain-0")).get();
            plain.send(new ProducerRecord<>(topic, 0, "p", "plain-1")).get();
            plain.send(new ProducerRecord<>(topic, 1, "p", "plain-2")).get();
            tx.initTransactions();
            tx.beginTransaction();
            for (int i = 0; i < 3; i++)
                tx.send(new ProducerRecord<>(topic, 0, "t", "txn-" + i));
            tx.flush();
            open = asJson(lsoGap(bootstrap, topic));
            tx.commitTransaction();
            // The commit marker lands just after EndTxn is answered.
            Common.waitFor(() -> lsoGap(bootstrap, topic).values().stream().allMatch(g -> g == 0));
            closed = asJson(lsoGap(bootstrap, topic));
        }
        Common.print(Json.obj("open", open, "closed", closed));
    }
}
