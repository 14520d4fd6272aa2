// LockPeer - one Apache Curator lock contender, driven line by line from
// stdin, for zklock's interoperability test (test/t/080_interop.pl).
//
//   java -cp CLASSPATH LockPeer HOSTS LOCKPATH MODE ID
//
// MODE: mutex (InterProcessMutex), read or write (the read or write lock of
// InterProcessReadWriteLock), multi (InterProcessMultiLock of mutexes on
// the comma-separated paths in LOCKPATH), or semaphore:N
// (InterProcessSemaphoreV2 with at most N leases; acquire takes one more
// lease, release returns the oldest).  ID becomes the data of every node this peer
// creates, so the test can tell its node from the others.
//
// Prints "ready" once the session is connected, then one reply per command:
//   acquire        wait (at most 60 s) until held: "acquired <epoch_ms>",
//                  or "timeout"
//   try <ms>       the same, waiting at most <ms>: "acquired <epoch_ms>" or
//                  "busy"
//   release        "released <epoch_ms>" (the time is taken before the
//                  node is deleted: the end of the critical section)
//   participants   "participants <node>,<node>,..." in Curator's order
//   quit           "bye", closes the session and exits
// Errors print "error <text>".  End of stdin closes the session and exits
// even while an acquire waits.  Every line is flushed at once.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Deque;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class LockPeer {
    static final int SESSION_TIMEOUT_MS = 20000;
    static final long ACQUIRE_WAIT_S = 60;

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: LockPeer HOSTS LOCKPATH mutex|read|write|multi|semaphore:N ID");
            System.exit(2);
        }
        String hosts = args[0], path = args[1], mode = args[2], id = args[3];
        byte[] data = id.getBytes(StandardCharsets.UTF_8);

        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(SESSION_TIMEOUT_MS)
                .connectionTimeoutMs(15000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .defaultData(data)
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("error no connection within 30 s");
            System.exit(1);
        }

        InterProcessLock lock = null;
        InterProcessSemaphoreV2 sem = null;
        Deque<Lease> leases = new ArrayDeque<>();
        if (mode.startsWith("semaphore:")) {
            sem = new InterProcessSemaphoreV2(client, path,
                    Integer.parseInt(mode.substring("semaphore:".length())));
            sem.setNodeData(data);
            mode = "semaphore";
        }
        switch (mode) {
            case "semaphore":
                break;
            case "mutex":
                lock = new InterProcessMutex(client, path);
                break;
            case "multi":
                lock = new InterProcessMultiLock(client, Arrays.asList(path.split(",")));
                break;
            case "read":
                lock = new InterProcessReadWriteLock(client, path, data).readLock();
                break;
            case "write":
                lock = new InterProcessReadWriteLock(client, path, data).writeLock();
                break;
            default:
                say("error unknown mode " + mode);
                System.exit(2);
                return;
        }

        // Commands are read by their own thread, so that the end of stdin
        // ends the peer even while the main thread waits in acquire().
        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null)
                    commands.add(line.trim());
            } catch (Exception e) {
                // treated as end of input
            }
            client.close();
            System.exit(0);
        }, "stdin-reader");
        reader.setDaemon(true);
        reader.start();

        say("ready");
        while (true) {
            String cmd = commands.take();
            try {
                if (sem != null && (cmd.equals("acquire") || cmd.startsWith("try "))) {
                    long ms = cmd.equals("acquire") ? ACQUIRE_WAIT_S * 1000
                            : Long.parseLong(cmd.substring(4).trim());
                    Lease l = sem.acquire(ms, TimeUnit.MILLISECONDS);
                    if (l != null)
                        leases.add(l);
                    say(l != null ? "acquired " + System.currentTimeMillis()
                            : cmd.equals("acquire") ? "timeout" : "busy");
                } else if (sem != null && cmd.equals("release")) {
                    long t = System.currentTimeMillis();
                    Lease l = leases.poll();
                    if (l == null) {
                        say("error no lease");
                    } else {
                        l.close();
                        say("released " + t);
                    }
                } else if (sem != null && cmd.equals("participants")) {
                    say("participants " + String.join(",", sem.getParticipantNodes()));
                } else if (cmd.equals("acquire")) {
                    boolean got = lock.acquire(ACQUIRE_WAIT_S, TimeUnit.SECONDS);
                    say(got ? "acquired " + System.currentTimeMillis() : "timeout");
                } else if (cmd.startsWith("try ")) {
                    long ms = Long.parseLong(cmd.substring(4).trim());
                    boolean got = lock.acquire(ms, TimeUnit.MILLISECONDS);
                    say(got ? "acquired " + System.currentTimeMillis() : "busy");
                } else if (cmd.equals("release")) {
                    long t = System.currentTimeMillis();
                    lock.release();
                    say("released " + t);
                } else if (cmd.equals("participants") && lock instanceof InterProcessMutex) {
                    say("participants " + String.join(",",
                            ((InterProcessMutex) lock).getParticipantNodes()));
                } else if (cmd.equals("quit")) {
                    say("bye");
                    client.close();
                    System.exit(0);
                } else if (!cmd.isEmpty()) {
                    say("error unknown command " + cmd);
                }
            } catch (Exception e) {
                say("error " + e.toString().replace('\n', ' '));
            }
        }
    }
}
