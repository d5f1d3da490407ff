/*
 * broker.h - the broker process: what main() calls.
 */
#ifndef CN_BROKER_BROKER_H
#define CN_BROKER_BROKER_H

#include <uv.h>

struct cn_broker;
struct cn_config;

/* Opens the data directory (recovering every partition log), binds the
 * listener and arms timers.  Takes ownership of cfg.  On failure returns a
 * negative error and writes a one-line reason to err.  Runs on: loop. */
int cn_broker_start(uv_loop_t *loop, struct cn_config *cfg,
                    struct cn_broker **out, char *err, size_t err_len);
/* Begins a clean shutdown: stop accepting, answer what is pending, sync and
 * checkpoint every log.  The loop ends once everything has closed. */
void cn_broker_stop(struct cn_broker *b);
/* Frees what is left after the loop has ended.  Returns the process's
 * exit status: 0 after a clean stop, 2 when the broker stopped because it
 * could not go on (the metadata quorum's reason is logged). */
int cn_broker_free(struct cn_broker *b);
int cn_broker_port(const struct cn_broker *b);

#endif
