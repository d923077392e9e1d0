/* fake_wallclock.c - an LD_PRELOAD shim for the tests: the process's wall
 * clock jumps by MW_FAKE_WALLCLOCK_JUMP_S seconds (negative: back) once
 * the file MW_FAKE_WALLCLOCK_TRIGGER exists, while CLOCK_MONOTONIC stays
 * real. It stands in for an NTP step or a resumed VM without touching the
 * machine's clock, which other work shares.
 *
 * What it shows: a deadline taken from CLOCK_REALTIME after the jump is a
 * year away for the kernel, which keeps the real clock, so a timed wait on
 * such a deadline stalls exactly as one would after a real step back of a
 * year; waits on CLOCK_MONOTONIC do not notice. clock_gettime (the
 * REALTIME clocks), gettimeofday and time are replaced; the real time comes
 * from the system call, which this shim cannot recurse into. Once the jump
 * has happened it writes one line to stderr, so that a test knows. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHECK_EVERY_NS 20000000 /* look for the trigger file at most this often */

static _Atomic int64_t offset_ns;
static _Atomic int jumped;
static _Atomic int64_t next_check_ns;

static int real_clock(clockid_t clk, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, clk, ts);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    real_clock(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The offset now: 0 until the trigger file appears, then the jump. */
static int64_t current_offset(void)
{
    if (atomic_load(&jumped)) return atomic_load(&offset_ns);
    const char *trigger = getenv("MW_FAKE_WALLCLOCK_TRIGGER");
    const char *jump = getenv("MW_FAKE_WALLCLOCK_JUMP_S");
    if (!trigger || !jump) return 0;
    int64_t now = mono_ns(), due = atomic_load(&next_check_ns);
    if (now < due || !atomic_compare_exchange_strong(&next_check_ns, &due, now + CHECK_EVERY_NS))
        return 0;
    if (access(trigger, F_OK) != 0) return 0;
    atomic_store(&offset_ns, strtoll(jump, NULL, 10) * 1000000000LL);
    if (!atomic_exchange(&jumped, 1))
        fprintf(stderr, "fake_wallclock: the wall clock jumped by %s s\n", jump);
    return atomic_load(&offset_ns);
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    int rc = real_clock(clk, ts);
    if (rc != 0 || (clk != CLOCK_REALTIME && clk != CLOCK_REALTIME_COARSE)) return rc;
    int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + current_offset();
    ts->tv_sec = (time_t)(t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    tv->tv_sec = ts.tv_sec; /* glibc declares tv non-null */
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
