package cairn.tests;

import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * The seeds' "InvalidProducerEpochException can be recoverable in modern
 * clients": a transaction outlives its transaction.timeout.ms (1 s), the
 * coordinator aborts it and bumps the epoch; the producer's next send
 * fails, it calls abortTransaction() and carries on with the same
 * instance.  Each step's outcome is printed.
 *
 *   TimeoutAbort BOOTSTRAP TOPIC TRANSACTIONAL_ID
 */
public final class TimeoutAbort {
    static Object attempt(Common.Check step) {
        try {
            step.ok();
            return "ok";
        } catch (Exception e) {
            return Common.error(e);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties pp = Common.producerProps(bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "1000");
        Object lateSend, abort, retry, epochs;
        try (Admin admin = Common.admin(bootstrap);
             KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "timed-out-0")).get();
            int before = Common.describeTxn(admin, tid).producerEpoch();
            boolean aborted = Common.waitFor(() -> Common.describeTxn(admin, tid).state()
                                                 == TransactionState.COMPLETE_ABORT);
            if (!aborted)
                throw new IllegalStateException("the coordinator did not time the transaction out");
            int after = Common.describeTxn(admin, tid).producerEpoch();
            epochs = Json.obj("before", before, "after_timeout", after);
            lateSend = attempt(() -> p.send(new ProducerRecord<>(topic, 0, "k", "timed-out-1")).get() != null);
            abort = attempt(() -> { p.abortTransaction(); return true; });
            retry = attempt(() -> {
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, "k", "retried-0")).get();
                p.commitTransaction();
                return true;
            });
        }
        Common.print(Json.obj("epochs", epochs, "late_send", lateSend, "abort", abort, "retry", retry,
                              "read_committed", Common.readAll(bootstrap, "read_committed", List.of(tp)),
                              "read_uncommitted", Common.readAll(bootstrap, "read_uncommitted", List.of(tp))));
    }
}
