/* mlwatch.h - version and build identity. MLWATCH_REVISION is set by the
 * build from git when available. */
#ifndef MLWATCH_H
#define MLWATCH_H

#define MLWATCH_VERSION "0.1.0"
#ifndef MLWATCH_REVISION
#define MLWATCH_REVISION "unknown"
#endif

#endif
