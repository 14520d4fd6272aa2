// CraftSnapshot - write a ZooKeeper snapshot in which chosen znodes already
// have a child counter near the int32 wrap, for tests only.
//
//   java -cp zookeeper.jar:zookeeper-jute.jar:... CraftSnapshot DATADIR PATH=N ...
//
// ZooKeeper 3.8 names a sequential child after the counter its parent keeps
// in the stored stat's cversion field ("%010d"), which grows by one per
// child create (the cversion a client sees in a Stat is derived from it:
// 2 * creates - children).  Driving it to 2^31 through the client API
// would take weeks, and there is no API to set it; but a server loads its
// tree from the newest snapshot in DATADIR/version-2 at start-up.  This
// program builds that tree with the server's own DataTree class: each PATH
// and its missing parents become persistent nodes, PATH's stored counter is
// set to N (the suffix its next sequential child will get; may be
// negative), and the server's FileTxnSnapLog writes the snapshot, so the
// format and checksum are what the server expects.  The snapshot carries no
// tree digest (the counter is set behind the digest's back): a server
// computes the digest of a loaded tree itself.  Run it once per server of
// the ensemble, before they start.  Prints "PATH counter=N" for each PATH.

import java.io.File;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.ZooKeeperServer;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public class CraftSnapshot {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: CraftSnapshot DATADIR PATH=N ...");
            System.exit(2);
        }
        ZooKeeperServer.setDigestEnabled(false);
        File dir = new File(args[0]);
        DataTree dt = new DataTree();
        long zxid = 0;
        long now = System.currentTimeMillis();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].lastIndexOf('=');
            String path = args[i].substring(0, eq);
            int counter = Integer.parseInt(args[i].substring(eq + 1));
            StringBuilder p = new StringBuilder();
            for (String part : path.substring(1).split("/")) {
                p.append('/').append(part);
                if (dt.getNode(p.toString()) == null)
                    dt.createNode(p.toString(), new byte[0],
                            ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, -1, ++zxid, now);
            }
            dt.getNode(path).stat.setCversion(counter);
        }
        dt.lastProcessedZxid = zxid;
        FileTxnSnapLog snaplog = new FileTxnSnapLog(dir, dir);
        snaplog.save(dt, new ConcurrentHashMap<Long, Integer>(), true);
        snaplog.close();
        for (int i = 1; i < args.length; i++) {
            String path = args[i].substring(0, args[i].lastIndexOf('='));
            System.out.println(path + " counter=" + dt.getNode(path).stat.getCversion());
        }
    }
}
