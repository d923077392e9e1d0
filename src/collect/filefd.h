/* filefd.h - parser for /proc/sys/fs/file-nr (exposed for tests and
 * fuzzing). */
#ifndef MW_FILEFD_H
#define MW_FILEFD_H

#include <stdint.h>

/* "1024\t0\t9223372036854775807\n": allocated file handles, free ones
 * (always 0 since 2.6) and the limit (fs.file-max). Returns 0, or -1 when
 * the text is not three unsigned numbers on one line. */
int mw_parse_file_nr(const char *text, uint64_t *allocated, uint64_t *maximum);

#endif
