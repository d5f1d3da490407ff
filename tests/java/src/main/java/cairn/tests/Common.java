package cairn.tests;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Client set-up and read-back shared by the test programs. */
public final class Common {
    /** Every blocking call is bounded; pytest's timeout is the outer one. */
    public static final Duration WAIT = Duration.ofSeconds(30);

    private Common() {}

    public static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        return p;
    }

    public static KafkaProducer<String, String> producer(String bootstrap) {
        return new KafkaProducer<>(producerProps(bootstrap));
    }

    public static KafkaProducer<String, String> txnProducer(String bootstrap, String tid) {
        Properties p = producerProps(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        return new KafkaProducer<>(p);
    }

    public static Properties consumerProps(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    public static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    public static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < n; i++)
            out.add(new TopicPartition(topic, i));
        return out;
    }

    /**
     * Everything a consumer at this isolation level sees from the start of
     * the partitions up to their end offsets (the high watermark, or the
     * LSO for read_committed), as {partition, offset, value} objects, plus
     * the end offsets under "end".
     */
    public static Map<String, Object> readAll(String bootstrap, String isolation,
                                              Collection<TopicPartition> parts) {
        List<Object> records = Json.list();
        Map<String, Object> ends = new java.util.TreeMap<>();
        try (KafkaConsumer<String, String> c =
                 new KafkaConsumer<>(consumerProps(bootstrap, isolation))) {
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = c.endOffsets(parts, WAIT);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!reached(c, end)) {
                if (System.nanoTime() > deadline)
                    throw new IllegalStateException("read " + records.size()
                        + " records; end offsets " + end + " not reached");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200)))
                    records.add(Json.obj("partition", r.partition(), "offset", r.offset(),
                                         "value", r.value()));
            }
            for (TopicPartition tp : parts)
                ends.put(String.valueOf(tp.partition()), end.get(tp));
        }
        return Json.obj("records", records, "end", ends);
    }

    private static boolean reached(KafkaConsumer<String, String> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet())
            if (c.position(e.getKey(), WAIT) < e.getValue())
                return false;
        return true;
    }

    public static TransactionDescription describeTxn(Admin admin, String tid) throws Exception {
        return admin.describeTransactions(List.of(tid)).description(tid)
            .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }

    public static Map<String, Object> txnJson(TransactionDescription d) {
        List<Object> tps = Json.list();
        for (TopicPartition tp : d.topicPartitions())
            tps.add(tp.toString());
        return Json.obj("state", d.state().toString(), "producer_id", d.producerId(),
                        "producer_epoch", d.producerEpoch(),
                        "timeout_ms", d.transactionTimeoutMs(),
                        "coordinator_id", d.coordinatorId(),
                        "start_time_ms", d.transactionStartTimeMs().isPresent()
                            ? d.transactionStartTimeMs().getAsLong() : null,
                        "partitions", tps);
    }

    /** An exception's class name and message, causes unwrapped. */
    public static Map<String, Object> error(Throwable t) {
        while ((t instanceof java.util.concurrent.ExecutionException
                || t.getClass() == org.apache.kafka.common.KafkaException.class)
               && t.getCause() != null)
            t = t.getCause();
        return Json.obj("class", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
    }

    public static void print(Object v) {
        System.out.println(Json.write(v));
        System.out.flush();
    }

    /** Waits for pred, polling; false if it did not hold within WAIT. */
    public static boolean waitFor(Check pred) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            if (pred.ok())
                return true;
            Thread.sleep(100);
        }
        return pred.ok();
    }

    @FunctionalInterface
    public interface Check {
        boolean ok() throws Exception;
    }

    public static Map<TopicPartition, Long> copy(Map<TopicPartition, Long> m) {
        return new HashMap<>(m);
    }
}
