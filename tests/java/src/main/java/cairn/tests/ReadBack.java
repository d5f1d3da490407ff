package cairn.tests;

/**
 * Everything in a topic's partitions, as a read_committed and as a
 * read_uncommitted consumer sees it (Common.readAll).
 *
 *   ReadBack BOOTSTRAP TOPIC PARTITIONS
 */
public final class ReadBack {
    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1];
        var parts = Common.partitions(topic, Integer.parseInt(args[2]));
        Common.print(Json.obj("read_committed", Common.readAll(bootstrap, "read_committed", parts),
                              "read_uncommitted", Common.readAll(bootstrap, "read_uncommitted", parts)));
    }
}
