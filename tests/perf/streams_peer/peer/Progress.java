package peer;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/** What the processors have done, for the main thread: when the first record came, how many were routed. */
final class Progress {
    final long expected;
    final AtomicLong processed = new AtomicLong();
    final AtomicLong routed = new AtomicLong();
    final CountDownLatch done = new CountDownLatch(1);
    private volatile long firstNanos;
    private volatile long lastNanos;

    Progress(long expected) {
        this.expected = expected;
    }

    void started() {
        if (firstNanos == 0) {
            synchronized (this) {
                if (firstNanos == 0) {
                    firstNanos = System.nanoTime();
                }
            }
        }
    }

    /** Counts one input record; true for the one that completes the expected count. */
    boolean processedOne() {
        if (processed.incrementAndGet() == expected) {
            lastNanos = System.nanoTime();
            done.countDown();
            return true;
        }
        return false;
    }

    long firstNanos() {
        return firstNanos;
    }

    long lastNanos() {
        return lastNanos;
    }
}
