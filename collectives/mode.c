/* mode.c -- trigger rules as text: the mode names, pcoll_parse_mode and pcoll_format_mode, the
 * one spelling of "sync", "solo", "majority", "quorum:Q" (pcoll.h). Pure: no MPI, no handle. */
#include "collectives/pcoll.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pcoll_mode_name(pcoll_mode_t m) {
    switch (m) {
    case PCOLL_SYNC: return "sync";
    case PCOLL_SOLO: return "solo";
    case PCOLL_MAJORITY: return "majority";
    case PCOLL_QUORUM: return "quorum";
    default: return "?";
    }
}

int pcoll_parse_mode(const char *s, pcoll_rule_t *r) {
    memset(r, 0, sizeof *r);
    r->quorum = 1;
    if (!s) return PCOLL_ERR_ARG;
    for (pcoll_mode_t m = PCOLL_SYNC; m < PCOLL_QUORUM; m++)
        if (!strcmp(s, pcoll_mode_name(m))) {
            r->mode = m;
            return PCOLL_OK;
        }
    if (!strncmp(s, "quorum:", 7)) {
        char *end;
        long q = strtol(s + 7, &end, 10);
        if (*end || end == s + 7 || q < 1 || q > PCOLL_MAX_RANKS) return PCOLL_ERR_ARG;
        r->mode = PCOLL_QUORUM;
        r->quorum = (int)q;
    } else
        return PCOLL_ERR_ARG;
    return PCOLL_OK;
}

const char *pcoll_format_mode(pcoll_mode_t mode, int quorum, char *buf, size_t len) {
    if (!buf || !len) return buf;
    if (mode == PCOLL_QUORUM)
        snprintf(buf, len, "%s:%d", pcoll_mode_name(mode), quorum);
    else
        snprintf(buf, len, "%s", pcoll_mode_name(mode));
    return buf;
}
