package cairn.tests;

import java.util.List;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * A transactional producer on partitions 0 and 1 of TOPIC: commit three
 * records, abort two, commit two more, then what the coordinator said
 * after each transaction (its epoch shows the transaction version: 2 bumps
 * it at every end) and what read_committed and read_uncommitted consumers
 * see.
 *
 *   Transactions BOOTSTRAP TOPIC TRANSACTIONAL_ID
 */
public final class Transactions {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        List<TopicPartition> parts = Common.partitions(topic, 2);
        List<Object> after = Json.list();
        try (Admin admin = Common.admin(bootstrap);
             KafkaProducer<String, String> p = Common.txnProducer(bootstrap, tid)) {
            p.initTransactions();
            after.add(Common.txnJson(Common.describeTxn(admin, tid)));
            String[][] txns = {{"c1-0", "c1-1", "c1-2"}, {"a-0", "a-1"}, {"c2-0", "c2-1"}};
            for (int t = 0; t < txns.length; t++) {
                p.beginTransaction();
                int i = 0;
                for (String v : txns[t])
                    p.send(new ProducerRecord<>(topic, i++ % 2, v, v));
                p.flush();
                if (txns[t][0].startsWith("a"))
                    p.abortTransaction();
                else
                    p.commitTransaction();
                // EndTxn is answered once the decision is durable; the
                // markers follow.  Wait for the complete state.
                Common.waitFor(() -> Common.describeTxn(admin, tid).state().toString()
                                   .startsWith("Complete"));
                after.add(Common.txnJson(Common.describeTxn(admin, tid)));
            }
        }
        Common.print(Json.obj("after", after,
                              "read_committed", Common.readAll(bootstrap, "read_committed", parts),
                              "read_uncommitted", Common.readAll(bootstrap, "read_uncommitted", parts)));
    }
}
