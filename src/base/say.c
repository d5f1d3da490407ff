/* say.c - log lines; see say.h. */
#include "say.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "clock.h"

enum cn_say_level cn_say_max_level = CN_SAY_INFO;

void cn_say(enum cn_say_level level, const char *fmt, ...)
{
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    if (level > cn_say_max_level)
        return;
    char line[2048];
    struct tm tm;
    int64_t now = cn_clock_wall_ms();
    time_t sec = (time_t)(now / 1000);
    gmtime_r(&sec, &tm);
    int n = snprintf(line, sizeof line,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, (long)(now % 1000), names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fputs per line keeps lines whole when workers log too. */
    fprintf(stderr, "%s\n", line);
}
