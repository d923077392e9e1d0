/* faultfs.h - a fault-injection and crash-simulation layer under the
 * store's file system calls, for tests only (tests/faultfs/faultfs.c).
 *
 * It defines open, write, pwrite, fsync, fdatasync, ftruncate, rename,
 * unlink, dup and close itself and passes them on to the C library: linked
 * into a test program (CMakeLists.txt: the unit tests that use it) it sits
 * under every call the store makes, by the same symbol interposition that
 * LD_PRELOAD uses, and reaches the C library's own through dlsym(RTLD_NEXT).
 * Only files whose path starts with the watched prefix are touched;
 * everything else passes straight through.
 *
 * For those files it can
 *  - count each call (faultfs_count),
 *  - delay it (faultfs_delay) or make it fail with an errno (faultfs_fail),
 *  - record it as an event with a sequence number (faultfs_events): a write
 *    with its file, offset and length; a sync as two events, when it began
 *    and when it returned; a rename and an unlink that succeeded; test code
 *    adds its own marks (faultfs_mark),
 *  - simulate a power loss (faultfs_crash_arm, faultfs_crash_now): every
 *    write not covered by a completed sync of its file is undone (the bytes
 *    it overwrote put back, the size it had restored; or some of them kept
 *    and one torn, faultfs_crash_loss), and so is every
 *    create, rename and unlink after the start of the last completed fsync
 *    of a directory (a journaling file system commits name changes in
 *    order, all of them at once), then the process ends with _exit. In the
 *    manner of SQLite's crash-test VFS.
 *
 * Writes made through stdio (fwrite) are not seen: the C library calls the
 * kernel directly. Memory-mapped writes are not seen either. */
#ifndef MW_FAULTFS_H
#define MW_FAULTFS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    FAULTFS_OPEN,
    FAULTFS_WRITE, /* write and pwrite */
    FAULTFS_FSYNC,
    FAULTFS_FDATASYNC,
    FAULTFS_FTRUNCATE,
    FAULTFS_RENAME,
    FAULTFS_UNLINK,
    FAULTFS_NOPS
} faultfs_op;

typedef enum {
    FAULTFS_EV_WRITE,      /* [off, off + len) of file written */
    FAULTFS_EV_SYNC_BEGIN, /* op is FAULTFS_FSYNC or FAULTFS_FDATASYNC */
    FAULTFS_EV_SYNC_END,   /* len is 0 when it succeeded, else the errno */
    FAULTFS_EV_MARK,       /* faultfs_mark: off is the caller's tag */
    FAULTFS_EV_RENAME,     /* a rename gave file its path (-1: a file never opened) */
    FAULTFS_EV_UNLINK,     /* file's path was unlinked (-1: a file never opened) */
} faultfs_event_kind;

typedef struct faultfs_event {
    uint64_t seq; /* from 1, in the order the calls happened */
    faultfs_event_kind kind;
    faultfs_op op;
    int file; /* faultfs_file_path(file); -1 for marks */
    uint64_t off, len;
} faultfs_event;

/* Watch the files under prefix (NULL: none) and forget every count, event,
 * fault and pending undo. */
void faultfs_watch(const char *prefix);
/* Sleep us microseconds before each call of op on a watched file. */
void faultfs_delay(faultfs_op op, unsigned us);
/* Fail calls of op on watched files with err after the first skip calls
 * (err 0: stop failing). */
void faultfs_fail(faultfs_op op, int err, uint64_t skip);
uint64_t faultfs_count(faultfs_op op);
/* Record events (off by default: a long run makes millions). */
void faultfs_record(int on);
/* Add a mark to the event log; returns its sequence number. */
uint64_t faultfs_mark(uint64_t tag);
/* The events so far (valid until the next call that records one). */
const faultfs_event *faultfs_events(size_t *n);
/* The path a file had when it was first opened ("" if unknown). */
const char *faultfs_file_path(int file);

/* Power-loss simulation. Undo records are kept from faultfs_crash_init on;
 * stash is a folder outside the watched prefix where unlinked and replaced
 * files are kept until they are known gone. */
void faultfs_crash_init(const char *stash);
/* What a power loss keeps of the writes that no sync covers: nothing (the
 * default), or, file by file, a random run of them in the order they were
 * made with the write after that run torn at a random byte (a disk that
 * wrote back in order and lost power in the middle of a write). */
typedef enum { FAULTFS_LOSE_ALL, FAULTFS_KEEP_SOME_TORN } faultfs_loss;
void faultfs_crash_loss(faultfs_loss loss, unsigned seed);
/* The exit status of a process that crashed at a watched call. */
#define FAULTFS_CRASH_EXIT 86
/* Crash at the n-th watched call from now (0: never). */
void faultfs_crash_arm(uint64_t calls);
/* Crash at the next watched call (any thread; async-signal-safe). */
void faultfs_crash_soon(void);
/* Crash now: undo what a power loss would lose, then _exit(status). */
void faultfs_crash_now(int status);

#endif
