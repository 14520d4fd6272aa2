// CraftSnapshot - write a ZooKeeper snapshot in which chosen znodes already
// have a child version (cversion) near the int32 wrap, for tests only.
//
//   java -cp zookeeper.jar:... CraftSnapshot DATADIR PATH=CVERSION ...
//
// ZooKeeper names a sequential child after its parent's cversion ("%010d"),
// and the cversion grows by one per child create or delete: driving it from
// 0 to 2^31 through the client API would take weeks.  There is no API to
// set it, but a server loads its tree from the newest snapshot in
// DATADIR/version-2 at start-up.  This program builds that tree with the
// server's own DataTree class: each PATH (and its missing parents) becomes a
// persistent node, and a scratch child created with an explicit parent
// cversion (the argument replaying transactions uses) and deleted again
// leaves PATH with the wanted cversion.  The snapshot is written with the
// server's FileTxnSnapLog, so its format, checksum and tree digest are what
// the server expects.  Run it once per server, before the servers start.
// Prints "PATH cversion=N" for every PATH as the tree holds it.

import java.io.File;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public class CraftSnapshot {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: CraftSnapshot DATADIR PATH=CVERSION ...");
            System.exit(2);
        }
        File dir = new File(args[0]);
        DataTree dt = new DataTree();
        long zxid = 0;
        long now = System.currentTimeMillis();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].lastIndexOf('=');
            String path = args[i].substring(0, eq);
            int cversion = Integer.parseInt(args[i].substring(eq + 1));
            // The node and its missing parents, as plain persistent nodes.
            StringBuilder p = new StringBuilder();
            for (String part : path.substring(1).split("/")) {
                p.append('/').append(part);
                if (dt.getNode(p.toString()) == null)
                    dt.createNode(p.toString(), new byte[0],
                            ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, -1, ++zxid, now);
            }
            String scratch = path + "/craft-snapshot-scratch";
            dt.createNode(scratch, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    0, cversion, ++zxid, now);
            dt.deleteNode(scratch, ++zxid);
        }
        dt.lastProcessedZxid = zxid;
        FileTxnSnapLog snaplog = new FileTxnSnapLog(dir, dir);
        snaplog.save(dt, new ConcurrentHashMap<Long, Integer>(), true);
        snaplog.close();
        for (int i = 1; i < args.length; i++) {
            String path = args[i].substring(0, args[i].lastIndexOf('='));
            DataNode n = dt.getNode(path);
            System.out.println(path + " cversion=" + n.stat.getCversion());
        }
    }
}
