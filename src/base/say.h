/*
 * say.h - the broker's log lines (stderr, one line each).
 *
 * Named "say" so it cannot be confused with the partition log (src/log).
 * Level names match what operators grep for: ERROR, WARN, INFO, DEBUG.
 */
#ifndef CN_BASE_SAY_H
#define CN_BASE_SAY_H

enum cn_say_level { CN_SAY_ERROR, CN_SAY_WARN, CN_SAY_INFO, CN_SAY_DEBUG };

extern enum cn_say_level cn_say_max_level; /* lines above this are dropped */

void cn_say(enum cn_say_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define CN_ERROR(...) cn_say(CN_SAY_ERROR, __VA_ARGS__)
#define CN_WARN(...) cn_say(CN_SAY_WARN, __VA_ARGS__)
#define CN_INFO(...) cn_say(CN_SAY_INFO, __VA_ARGS__)
#define CN_DEBUG(...)                                                   \
    do {                                                                \
        if (cn_say_max_level >= CN_SAY_DEBUG)                           \
            cn_say(CN_SAY_DEBUG, __VA_ARGS__);                          \
    } while (0)

#endif
