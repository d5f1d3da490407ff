/*
 * fuzz_prom.c - libFuzzer target for cairnctl's Prometheus text parser
 * (src/cli/prom.c), which reads /metrics off the network.
 *
 * Any bytes: every sample found lies inside the input, its labels inside
 * the line, and every label read back fits its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/prom.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so ASan sees any read past the end. */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    size_t pos = 0, last = 0;
    struct cli_prom_sample s;
    static const char *const names[] = {"topic", "partition", "error", "x"};
    while (cli_prom_next(text, size, &pos, &s)) {
        if (pos <= last || pos > size || s.name < text ||
            s.name + s.name_len > text + size || s.name_len == 0)
            abort();
        if (s.labels && (s.labels < s.name ||
                         s.labels + s.labels_len > text + size))
            abort();
        last = pos;
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            char v[8];
            if (cli_prom_label(&s, names[i], v, sizeof v) &&
                strlen(v) >= sizeof v)
                abort();
        }
        (void)cli_prom_is(&s, "cairn_cleaner_threads");
    }
    free(text);
    return 0;
}
