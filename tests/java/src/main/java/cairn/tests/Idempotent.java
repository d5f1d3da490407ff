package cairn.tests;

import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Idempotent producer: COUNT records to partition 0 of TOPIC with up to
 * five requests in flight, then what the partition holds and what
 * DescribeProducers says of the producer.
 *
 *   Idempotent BOOTSTRAP TOPIC COUNT
 */
public final class Idempotent {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Object> offsets = Json.list();
        try (KafkaProducer<String, String> p = Common.producer(bootstrap)) {
            Future<?>[] acks = new Future<?>[count];
            for (int i = 0; i < count; i++) {
                acks[i] = p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
                if (i % 100 == 99)
                    p.flush();  // several batches, so sequences advance
            }
            p.flush();
            for (Future<?> f : acks)
                offsets.add(((RecordMetadata) f.get(30, TimeUnit.SECONDS)).offset());
        }
        List<Object> producers = Json.list();
        try (Admin admin = Common.admin(bootstrap)) {
            for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp)
                     .get(30, TimeUnit.SECONDS).activeProducers())
                producers.add(Json.obj("producer_id", s.producerId(), "epoch", s.producerEpoch(),
                                       "last_sequence", s.lastSequence(),
                                       "open_txn_offset", s.currentTransactionStartOffset().isPresent()
                                           ? s.currentTransactionStartOffset().getAsLong() : null));
        }
        Map<String, Object> read = Common.readAll(bootstrap, "read_uncommitted", List.of(tp));
        Common.print(Json.obj("acked_offsets", offsets, "read", read, "producers", producers));
    }
}
