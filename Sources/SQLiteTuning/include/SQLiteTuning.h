#ifndef SQLITE_TUNING_H
#define SQLITE_TUNING_H

/// Turns off SQLite's memory statistics for the whole process (`SQLITE_CONFIG_MEMSTATUS`, 0), so that each of its
/// allocations no longer takes a process-wide mutex to count bytes. `sqlite3_config` is variadic, which Swift cannot
/// call: hence this function. It must run before SQLite initialises (before the first connection opens); later it
/// changes nothing. Returns SQLite's result code (0 when applied, 21 `SQLITE_MISUSE` when SQLite already runs).
int enrichment_sqlite_disable_memory_statistics(void);

#endif
