/*
 * Status strings and the per-thread message of the last failing call.
 */
#ifndef FMHA_TILE_ERROR_H
#define FMHA_TILE_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include "../api.h"
#include "../platform/platform.h"

static FMHAI_THREAD_LOCAL char fmhai_errbuf[512];

static inline fmha_status fmhai_fail(fmha_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fmhai_errbuf, sizeof(fmhai_errbuf), fmt, ap);
    va_end(ap);
    return s;
}

FMHA_API const char *fmha_last_error(void) { return fmhai_errbuf; }

FMHA_API const char *fmha_status_str(fmha_status s)
{
    switch (s) {
    case FMHA_OK:              return "ok";
    case FMHA_ERR_INVALID_ARG: return "invalid argument";
    case FMHA_ERR_UNSUPPORTED: return "unsupported";
    case FMHA_ERR_NO_KERNEL:   return "no kernel";
    case FMHA_ERR_DEVICE:      return "device error";
    case FMHA_ERR_LAUNCH:      return "launch failed";
    }
    return "unknown status";
}

#endif /* FMHA_TILE_ERROR_H */
