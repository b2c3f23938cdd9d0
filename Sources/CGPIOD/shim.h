// libgpiod behind a version-neutral C API. Only PiconetLights imports this.
//
// Everything that differs between libgpiod 1.6 (Debian 12, Pi OS bookworm) and
// 2.x (Debian 13, newer Pi OS) lives in this one file. 1.6 is the default;
// build against 2.x with -Xcc -DPICONET_GPIOD_V2 (libgpiod-dev 2.x installed).
// Every function returns 0 / a handle on success and -1 / NULL with errno set.
#ifndef PICONET_GPIOD_SHIM_H
#define PICONET_GPIOD_SHIM_H
#include <gpiod.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct piconet_gpio_chip piconet_gpio_chip;
typedef struct piconet_gpio_line piconet_gpio_line;

#define PICONET_GPIO_OUTPUT 0
#define PICONET_GPIO_INPUT_EDGES 1
#define PICONET_GPIO_BIAS_NONE 0
#define PICONET_GPIO_BIAS_PULL_UP 1
#define PICONET_GPIO_BIAS_PULL_DOWN 2

static inline const char *piconet_gpiod_api(void) {
#ifdef PICONET_GPIOD_V2
    return "libgpiod 2.x";
#else
    return "libgpiod 1.6";
#endif
}

#ifndef PICONET_GPIOD_V2
/* ------------------------------------------------------------ libgpiod 1.6 */

static inline piconet_gpio_chip *piconet_chip_open(const char *path) {
    return (piconet_gpio_chip *)gpiod_chip_open(path);
}
static inline void piconet_chip_close(piconet_gpio_chip *c) { gpiod_chip_close((struct gpiod_chip *)c); }
/* Copies the chip's label into buf (NUL-terminated, truncated to n-1). */
static inline void piconet_chip_label(piconet_gpio_chip *c, char *buf, size_t n) {
    const char *l = gpiod_chip_label((struct gpiod_chip *)c);
    if (n) { strncpy(buf, l ? l : "", n - 1); buf[n - 1] = 0; }
}
static inline unsigned piconet_chip_num_lines(piconet_gpio_chip *c) {
    return gpiod_chip_num_lines((struct gpiod_chip *)c);
}
/* Line info without requesting it: used? and by whom (buf empty when unnamed). */
static inline int piconet_chip_line_info(piconet_gpio_chip *c, unsigned offset, int *used,
                                         char *consumer, size_t n) {
    struct gpiod_line *l = gpiod_chip_get_line((struct gpiod_chip *)c, offset);
    if (!l) return -1;
    if (gpiod_line_update(l) < 0) return -1;
    *used = gpiod_line_is_used(l) ? 1 : 0;
    const char *s = gpiod_line_consumer(l);
    if (n) { strncpy(consumer, s ? s : "", n - 1); consumer[n - 1] = 0; }
    return 0;
}

struct piconet_gpio_line { struct gpiod_line *line; };

/* Requests one line. mode: OUTPUT (initial = logical value) or INPUT_EDGES (both edges). */
static inline piconet_gpio_line *piconet_line_request(piconet_gpio_chip *c, unsigned offset, int mode,
                                                      int active_low, int bias, int initial,
                                                      const char *consumer) {
    struct gpiod_line *l = gpiod_chip_get_line((struct gpiod_chip *)c, offset);
    if (!l) return NULL;
    struct gpiod_line_request_config cfg = { consumer,
        mode == PICONET_GPIO_OUTPUT ? GPIOD_LINE_REQUEST_DIRECTION_OUTPUT : GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES, 0 };
    if (active_low) cfg.flags |= GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW;
    if (bias == PICONET_GPIO_BIAS_PULL_UP) cfg.flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP;
    if (bias == PICONET_GPIO_BIAS_PULL_DOWN) cfg.flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN;
    if (gpiod_line_request(l, &cfg, initial) < 0) return NULL;
    piconet_gpio_line *h = (piconet_gpio_line *)malloc(sizeof *h);
    if (!h) { gpiod_line_release(l); errno = ENOMEM; return NULL; }
    h->line = l;
    return h;
}
static inline int piconet_line_set(piconet_gpio_line *h, int value) { return gpiod_line_set_value(h->line, value); }
static inline int piconet_line_get(piconet_gpio_line *h) { return gpiod_line_get_value(h->line); }
static inline int piconet_line_event_fd(piconet_gpio_line *h) { return gpiod_line_event_get_fd(h->line); }
/* Reads one pending edge: *rising = 1 for a rising (logical) edge; *ns = kernel timestamp. */
static inline int piconet_line_read_event(piconet_gpio_line *h, int *rising, uint64_t *ns) {
    struct gpiod_line_event ev;
    if (gpiod_line_event_read(h->line, &ev) < 0) return -1;
    *rising = ev.event_type == GPIOD_LINE_EVENT_RISING_EDGE;
    *ns = (uint64_t)ev.ts.tv_sec * 1000000000ull + (uint64_t)ev.ts.tv_nsec;
    return 0;
}
static inline void piconet_line_release(piconet_gpio_line *h) {
    if (!h) return;
    gpiod_line_release(h->line);
    free(h);
}

#else
/* ------------------------------------------------------------ libgpiod 2.x
 * Written against the 2.x API documentation; not built on this project's CI
 * machines (Debian 12 ships 1.6). */

static inline piconet_gpio_chip *piconet_chip_open(const char *path) {
    return (piconet_gpio_chip *)gpiod_chip_open(path);
}
static inline void piconet_chip_close(piconet_gpio_chip *c) { gpiod_chip_close((struct gpiod_chip *)c); }
static inline void piconet_chip_label(piconet_gpio_chip *c, char *buf, size_t n) {
    struct gpiod_chip_info *i = gpiod_chip_get_info((struct gpiod_chip *)c);
    const char *l = i ? gpiod_chip_info_get_label(i) : "";
    if (n) { strncpy(buf, l ? l : "", n - 1); buf[n - 1] = 0; }
    if (i) gpiod_chip_info_free(i);
}
static inline unsigned piconet_chip_num_lines(piconet_gpio_chip *c) {
    struct gpiod_chip_info *i = gpiod_chip_get_info((struct gpiod_chip *)c);
    unsigned n = i ? (unsigned)gpiod_chip_info_get_num_lines(i) : 0;
    if (i) gpiod_chip_info_free(i);
    return n;
}
static inline int piconet_chip_line_info(piconet_gpio_chip *c, unsigned offset, int *used,
                                         char *consumer, size_t n) {
    struct gpiod_line_info *i = gpiod_chip_get_line_info((struct gpiod_chip *)c, offset);
    if (!i) return -1;
    *used = gpiod_line_info_is_used(i) ? 1 : 0;
    const char *s = gpiod_line_info_get_consumer(i);
    if (n) { strncpy(consumer, s ? s : "", n - 1); consumer[n - 1] = 0; }
    gpiod_line_info_free(i);
    return 0;
}

struct piconet_gpio_line {
    struct gpiod_line_request *req;
    struct gpiod_edge_event_buffer *events;
    unsigned offset;
};

static inline piconet_gpio_line *piconet_line_request(piconet_gpio_chip *c, unsigned offset, int mode,
                                                      int active_low, int bias, int initial,
                                                      const char *consumer) {
    piconet_gpio_line *h = NULL;
    struct gpiod_line_settings *s = gpiod_line_settings_new();
    struct gpiod_line_config *lc = gpiod_line_config_new();
    struct gpiod_request_config *rc = gpiod_request_config_new();
    if (!s || !lc || !rc) { errno = ENOMEM; goto out; }
    if (mode == PICONET_GPIO_OUTPUT) {
        gpiod_line_settings_set_direction(s, GPIOD_LINE_DIRECTION_OUTPUT);
        gpiod_line_settings_set_output_value(s, initial ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
    } else {
        gpiod_line_settings_set_direction(s, GPIOD_LINE_DIRECTION_INPUT);
        gpiod_line_settings_set_edge_detection(s, GPIOD_LINE_EDGE_BOTH);
    }
    gpiod_line_settings_set_active_low(s, active_low ? true : false);
    if (bias == PICONET_GPIO_BIAS_PULL_UP) gpiod_line_settings_set_bias(s, GPIOD_LINE_BIAS_PULL_UP);
    if (bias == PICONET_GPIO_BIAS_PULL_DOWN) gpiod_line_settings_set_bias(s, GPIOD_LINE_BIAS_PULL_DOWN);
    if (gpiod_line_config_add_line_settings(lc, &offset, 1, s) < 0) goto out;
    gpiod_request_config_set_consumer(rc, consumer);
    h = (piconet_gpio_line *)calloc(1, sizeof *h);
    if (!h) { errno = ENOMEM; goto out; }
    h->offset = offset;
    h->req = gpiod_chip_request_lines((struct gpiod_chip *)c, rc, lc);
    if (!h->req) { free(h); h = NULL; goto out; }
    if (mode != PICONET_GPIO_OUTPUT) h->events = gpiod_edge_event_buffer_new(1);
out:
    if (rc) gpiod_request_config_free(rc);
    if (lc) gpiod_line_config_free(lc);
    if (s) gpiod_line_settings_free(s);
    return h;
}
static inline int piconet_line_set(piconet_gpio_line *h, int value) {
    return gpiod_line_request_set_value(h->req, h->offset, value ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
}
static inline int piconet_line_get(piconet_gpio_line *h) {
    int v = (int)gpiod_line_request_get_value(h->req, h->offset);
    return v < 0 ? -1 : v;
}
static inline int piconet_line_event_fd(piconet_gpio_line *h) { return gpiod_line_request_get_fd(h->req); }
static inline int piconet_line_read_event(piconet_gpio_line *h, int *rising, uint64_t *ns) {
    if (!h->events) { errno = EINVAL; return -1; }
    if (gpiod_line_request_read_edge_events(h->req, h->events, 1) < 1) return -1;
    struct gpiod_edge_event *e = gpiod_edge_event_buffer_get_event(h->events, 0);
    *rising = gpiod_edge_event_get_event_type(e) == GPIOD_EDGE_EVENT_RISING_EDGE;
    *ns = gpiod_edge_event_get_timestamp_ns(e);
    return 0;
}
static inline void piconet_line_release(piconet_gpio_line *h) {
    if (!h) return;
    if (h->events) gpiod_edge_event_buffer_free(h->events);
    gpiod_line_request_release(h->req);
    free(h);
}
#endif
#endif
