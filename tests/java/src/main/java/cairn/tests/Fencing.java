package cairn.tests;

import java.util.List;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Zombie fencing: producer A opens a transaction and writes; producer B
 * starts with the same transactional id, which fences A and aborts its
 * transaction; A's commit must then fail (ProducerFencedException), and
 * B's own transaction commits.
 *
 *   Fencing BOOTSTRAP TOPIC TRANSACTIONAL_ID
 */
public final class Fencing {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        TopicPartition tp = new TopicPartition(topic, 0);
        Object zombieCommit = null, zombieSendAfter = null;
        Object epochA, epochB;
        try (Admin admin = Common.admin(bootstrap);
             KafkaProducer<String, String> a = Common.txnProducer(bootstrap, tid)) {
            a.initTransactions();
            a.beginTransaction();
            a.send(new ProducerRecord<>(topic, 0, "zombie", "zombie-0")).get();
            epochA = Common.describeTxn(admin, tid).producerEpoch();
            try (KafkaProducer<String, String> b = Common.txnProducer(bootstrap, tid)) {
                b.initTransactions();
                epochB = Common.describeTxn(admin, tid).producerEpoch();
                try {
                    a.commitTransaction();
                    zombieCommit = "committed";
                } catch (Exception e) {
                    zombieCommit = Common.error(e);
                }
                try {
                    a.send(new ProducerRecord<>(topic, 0, "zombie", "zombie-1")).get();
                    zombieSendAfter = "sent";
                } catch (Exception e) {
                    zombieSendAfter = Common.error(e);
                }
                b.beginTransaction();
                b.send(new ProducerRecord<>(topic, 0, "b", "b-0"));
                b.commitTransaction();
            }
        }
        Common.print(Json.obj("epoch_a", epochA, "epoch_b", epochB,
                              "zombie_commit", zombieCommit, "zombie_send_after", zombieSendAfter,
                              "read_committed", Common.readAll(bootstrap, "read_committed", List.of(tp)),
                              "read_uncommitted", Common.readAll(bootstrap, "read_uncommitted", List.of(tp))));
    }
}
