// CuratorBench - Apache Curator's InterProcessMutex in the zklock benchmark.
//
//   java CuratorBench cycle    HOSTS WARM N OUT        one client, one lock
//   java CuratorBench setcycle HOSTS WARM N OUT        one client, five locks
//                                                      as one (InterProcess-
//                                                      MultiLock)
//   java CuratorBench handoff  HOSTS CLIENTS SECS OUT  one lock, one client
//                                                      (session) per thread
//   java CuratorBench distinct HOSTS CLIENTS SECS OUT  one lock per thread,
//                                                      one client per thread
//   java CuratorBench latency  HOSTS WARM N SETTLE_US OUT
//                                                      hand-off latency: from
//                                                      the holder's release to
//                                                      the waiter's acquire
//                                                      returning (two clients)
//   java CuratorBench semlatency HOSTS WARM N SETTLE_US OUT
//                                                      the same with one lease
//                                                      of InterProcessSemaphoreV2
//   java CuratorBench herd     HOSTS WAITERS OUT       one shared client, a
//                                                      holder and WAITERS
//                                                      threads on one lock
//   java CuratorBench cron     HOSTS WARM N OUT        every sample a new
//                                                      client (session): lock,
//                                                      unlock, close
// Over TLS as ZooKeeper's Java client is told to (system properties:
// zookeeper.clientCnxnSocket, zookeeper.client.secure, zookeeper.ssl.*).
//
// Writes OUT.lat (microseconds per line: the cycle, or for handoff the
// acquire) and OUT.sum (key=value).  herd writes OUT.ready once every waiter
// is queued and waits (bounded) for the file OUT.go before releasing.
// Every client warms up (JIT) before the timed part.

import java.io.File;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorBench {
    static final String ROOT = "/bench-curator";
    static final long WAIT_S = 30;

    static CuratorFramework client(String hosts) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(30000)
                .connectionTimeoutMs(15000)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        c.start();
        if (!c.blockUntilConnected((int) WAIT_S, TimeUnit.SECONDS))
            throw new IllegalStateException("no connection within " + WAIT_S + " s");
        return c;
    }

    static void acquire(InterProcessMutex m) throws Exception {
        if (!m.acquire(WAIT_S, TimeUnit.SECONDS))
            throw new IllegalStateException("acquire timed out");
    }

    static final class Samples {
        long[] v = new long[4096];
        int n;

        void add(long nanos) {
            if (n == v.length)
                v = java.util.Arrays.copyOf(v, n * 2);
            v[n++] = (nanos + 500) / 1000;
        }
    }

    static void write(String out, List<Samples> all, long cycles, double seconds,
                      int clients, String extra) throws IOException {
        try (PrintWriter w = new PrintWriter(new FileWriter(out + ".lat"))) {
            for (Samples s : all)
                for (int i = 0; i < s.n; i++)
                    w.println(s.v[i]);
        }
        try (PrintWriter w = new PrintWriter(new FileWriter(out + ".sum"))) {
            w.printf("cycles=%d%nseconds=%.6f%nclients=%d%n%s", cycles, seconds,
                     clients, extra);
        }
    }

    static void cycle(String hosts, int warm, int n, String out, boolean set)
            throws Exception {
        CuratorFramework c = client(hosts);
        List<String> paths = new ArrayList<>();
        for (int k = 1; k <= 5; k++)
            paths.add(ROOT + "/s" + k);
        InterProcessLock m = set ? new InterProcessMultiLock(c, paths)
                : new InterProcessMutex(c, ROOT + "/u");
        Samples s = new Samples();
        long tAll = 0;
        for (int i = 0; i < warm + n; i++) {
            if (i == warm)
                tAll = System.nanoTime();
            long t0 = System.nanoTime();
            if (!m.acquire(WAIT_S, TimeUnit.SECONDS))
                throw new IllegalStateException("acquire timed out");
            m.release();
            if (i >= warm)
                s.add(System.nanoTime() - t0);
        }
        double secs = (System.nanoTime() - tAll) / 1e9;
        List<Samples> all = new ArrayList<>();
        all.add(s);
        write(out, all, n, secs, 1, "");
        c.close();
    }

    // A cron job's pattern in one JVM: each sample starts a client (a new
    // session, and its handshake over TLS), takes and gives back the lock
    // and closes the client.
    static void cron(String hosts, int warm, int n, String out) throws Exception {
        Samples s = new Samples();
        long tAll = 0;
        for (int i = 0; i < warm + n; i++) {
            if (i == warm)
                tAll = System.nanoTime();
            long t0 = System.nanoTime();
            CuratorFramework c = client(hosts);
            InterProcessMutex m = new InterProcessMutex(c, ROOT + "/cron");
            acquire(m);
            m.release();
            c.close();
            if (i >= warm)
                s.add(System.nanoTime() - t0);
        }
        double secs = (System.nanoTime() - tAll) / 1e9;
        List<Samples> all = new ArrayList<>();
        all.add(s);
        write(out, all, n, secs, 1, "");
    }

    // One side of a hand-off: takes and gives back what is handed off.
    interface Side {
        void take() throws Exception;
        void give() throws Exception;
    }

    static Side mutexSide(InterProcessMutex m) {
        return new Side() {
            public void take() throws Exception { acquire(m); }
            public void give() throws Exception { m.release(); }
        };
    }

    static Side leaseSide(InterProcessSemaphoreV2 s) {
        return new Side() {
            Lease lease;
            public void take() throws Exception {
                lease = s.acquire(WAIT_S, TimeUnit.SECONDS);
                if (lease == null)
                    throw new IllegalStateException("no lease within " + WAIT_S + " s");
            }
            public void give() throws Exception { lease.close(); }
        };
    }

    // Hand-off latency.  The waiter runs in its own thread (a mutex is
    // released by the thread that holds it); the main thread takes, waits
    // until the waiter is queued (queued: the children of queuePath) and
    // SETTLE_US more, then gives back; the sample runs to the waiter's take
    // returning.
    static void handOff(CuratorFramework ca, CuratorFramework cb, Side a, Side b,
                        String queuePath, int warm, int n, long settleUs, String out)
            throws Exception {
        java.util.concurrent.BlockingQueue<Long> acquired =
                new java.util.concurrent.LinkedBlockingQueue<>();
        java.util.concurrent.BlockingQueue<Boolean> cmd =
                new java.util.concurrent.LinkedBlockingQueue<>();
        java.util.concurrent.BlockingQueue<Boolean> released =
                new java.util.concurrent.LinkedBlockingQueue<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread w = new Thread(() -> {
            try {
                while (cmd.take()) {
                    b.take();
                    acquired.put(System.nanoTime());
                    cmd.take();
                    b.give();
                    released.put(true);
                }
            } catch (Throwable t) {
                failure.set(t);
                acquired.offer(-1L);
                released.offer(false);
            }
        });
        w.start();
        Samples s = new Samples();
        long tAll = 0;
        for (int i = 0; i < warm + n; i++) {
            if (i == warm)
                tAll = System.nanoTime();
            a.take();
            cmd.put(true);
            long limit = System.nanoTime() + 10_000_000_000L;
            while (ca.checkExists().forPath(queuePath) == null
                   || ca.getChildren().forPath(queuePath).size() != 2) {
                if (System.nanoTime() > limit || failure.get() != null)
                    throw new IllegalStateException("waiter did not queue", failure.get());
                Thread.sleep(0, 200_000);
            }
            TimeUnit.MICROSECONDS.sleep(settleUs);
            long t0 = System.nanoTime();
            a.give();
            Long t1 = acquired.poll(WAIT_S, TimeUnit.SECONDS);
            if (t1 == null || t1 < 0)
                throw new IllegalStateException("waiter failed", failure.get());
            if (i >= warm)
                s.add(t1 - t0);
            cmd.put(true);
            Boolean ok = released.poll(WAIT_S, TimeUnit.SECONDS);
            if (ok == null || !ok)
                throw new IllegalStateException("waiter did not release", failure.get());
        }
        cmd.put(false);
        w.join(WAIT_S * 1000);
        double secs = (System.nanoTime() - tAll) / 1e9;
        List<Samples> all = new ArrayList<>();
        all.add(s);
        write(out, all, n, secs, 2, "");
        ca.close();
        cb.close();
    }

    static void latency(String hosts, int warm, int n, long settleUs, String out)
            throws Exception {
        CuratorFramework ca = client(hosts);
        CuratorFramework cb = client(hosts);
        String path = ROOT + "/l";
        handOff(ca, cb, mutexSide(new InterProcessMutex(ca, path)),
                mutexSide(new InterProcessMutex(cb, path)), path, warm, n, settleUs, out);
    }

    // Semaphore hand-off: one lease (max 1); the waiter is queued once its
    // lease node is there (it then holds the semaphore's mutex and watches
    // the leases).
    static void semLatency(String hosts, int warm, int n, long settleUs, String out)
            throws Exception {
        CuratorFramework ca = client(hosts);
        CuratorFramework cb = client(hosts);
        String path = ROOT + "/s";
        handOff(ca, cb, leaseSide(new InterProcessSemaphoreV2(ca, path, 1)),
                leaseSide(new InterProcessSemaphoreV2(cb, path, 1)), path + "/leases",
                warm, n, settleUs, out);
    }

    static void multi(String hosts, int clients, double secs, String out,
                      boolean handoff) throws Exception {
        CuratorFramework[] cs = new CuratorFramework[clients];
        InterProcessMutex[] ms = new InterProcessMutex[clients];
        Samples[] ss = new Samples[clients];
        long[] cycles = new long[clients];
        long[] finish = new long[clients];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        for (int i = 0; i < clients; i++) {
            cs[i] = client(hosts);
            ms[i] = new InterProcessMutex(cs[i], ROOT + (handoff ? "/h" : "/d" + i));
            ss[i] = new Samples();
            // warm-up on a private lock: JIT (about 250 cycles in all),
            // lock directories
            InterProcessMutex w = new InterProcessMutex(cs[i], ROOT + "/warm" + i);
            for (int k = 0; k < Math.max(8, 250 / clients); k++) {
                acquire(w);
                w.release();
            }
        }
        CyclicBarrier ready = new CyclicBarrier(clients + 1);
        CyclicBarrier go = new CyclicBarrier(clients + 1);
        long[] end = new long[1];
        Thread[] th = new Thread[clients];
        for (int i = 0; i < clients; i++) {
            final int idx = i;
            th[i] = new Thread(() -> {
                try {
                    ready.await();
                    go.await();
                    while (System.nanoTime() < end[0] && failure.get() == null) {
                        long t0 = System.nanoTime();
                        acquire(ms[idx]);
                        long t1 = System.nanoTime();
                        ms[idx].release();
                        ss[idx].add(handoff ? t1 - t0 : System.nanoTime() - t0);
                        cycles[idx]++;
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
                finish[idx] = System.nanoTime();
            });
            th[i].start();
        }
        ready.await(120, TimeUnit.SECONDS);
        long start = System.nanoTime();
        end[0] = start + (long) (secs * 1e9);
        go.await(120, TimeUnit.SECONDS);
        long last = start, total = 0;
        List<Samples> all = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            th[i].join();
            last = Math.max(last, finish[i]);
            total += cycles[i];
            all.add(ss[i]);
        }
        if (failure.get() != null)
            throw new RuntimeException("a client failed", failure.get());
        write(out, all, total, (last - start) / 1e9, clients, "");
        for (CuratorFramework c : cs)
            c.close();
    }

    static void herd(String hosts, int waiters, String out) throws Exception {
        CuratorFramework c = client(hosts);
        String path = ROOT + "/herd";
        // JIT warm-up on a private lock
        InterProcessMutex w = new InterProcessMutex(c, ROOT + "/herd-warm");
        for (int k = 0; k < 100; k++) {
            acquire(w);
            w.release();
        }
        InterProcessMutex holder = new InterProcessMutex(c, path);
        acquire(holder);
        CountDownLatch done = new CountDownLatch(waiters);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long tConn = System.nanoTime();
        for (int i = 0; i < waiters; i++) {
            Thread t = new Thread(() -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(c, path);
                    if (!m.acquire(180, TimeUnit.SECONDS))
                        throw new IllegalStateException("herd waiter timed out");
                    m.release();
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
                done.countDown();
            });
            t.setDaemon(true);
            t.start();
        }
        long deadline = System.nanoTime() + 180_000_000_000L;
        int queued = 0;
        while (System.nanoTime() < deadline) {
            queued = c.getChildren().forPath(path).size() - 1;
            if (queued >= waiters)
                break;
            Thread.sleep(100);
        }
        if (queued < waiters)
            throw new IllegalStateException("only " + queued + " waiters queued");
        // every waiter has its node; give the last ones time to set their watch
        Thread.sleep(500);
        double connSecs = (System.nanoTime() - tConn) / 1e9;
        new File(out + ".ready").createNewFile();
        File goFile = new File(out + ".go");
        deadline = System.nanoTime() + 120_000_000_000L;
        while (!goFile.exists() && System.nanoTime() < deadline)
            Thread.sleep(20);
        if (!goFile.exists())
            throw new IllegalStateException("no go signal");
        long t0 = System.nanoTime();
        holder.release();
        boolean all = done.await(120, TimeUnit.SECONDS);
        double secs = (System.nanoTime() - t0) / 1e9;
        long acquired = waiters - done.getCount();
        try (PrintWriter wr = new PrintWriter(new FileWriter(out + ".sum"))) {
            wr.printf("waiters=%d%nacquired=%d%nseconds=%.6f%nconnect_seconds=%.3f%n",
                      waiters, acquired, secs, connSecs);
        }
        if (!all || failure.get() != null)
            throw new RuntimeException("herd incomplete", failure.get());
        c.close();
    }

    public static void main(String[] a) throws Exception {
        try {
            switch (a[0]) {
                case "cycle":
                case "setcycle":
                    cycle(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]), a[4],
                          a[0].equals("setcycle"));
                    break;
                case "handoff":
                case "distinct":
                    multi(a[1], Integer.parseInt(a[2]), Double.parseDouble(a[3]), a[4],
                          a[0].equals("handoff"));
                    break;
                case "herd":
                    herd(a[1], Integer.parseInt(a[2]), a[3]);
                    break;
                case "cron":
                    cron(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]), a[4]);
                    break;
                case "latency":
                    latency(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                            Long.parseLong(a[4]), a[5]);
                    break;
                case "semlatency":
                    semLatency(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                               Long.parseLong(a[4]), a[5]);
                    break;
                default:
                    System.err.println("unknown mode " + a[0]);
                    System.exit(2);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }
}
