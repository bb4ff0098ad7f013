#include "convert/timestamp.h"

#include <stdio.h>

/* n decimal digits at s[*i] as a number; -1 when they are not digits. */
static int digits(const char *s, size_t len, size_t *i, int n) {
    int v = 0;
    for (int k = 0; k < n; k++, (*i)++) {
        if (*i >= len || s[*i] < '0' || s[*i] > '9')
            return -1;
        v = v * 10 + (s[*i] - '0');
    }
    return v;
}

static int expect(const char *s, size_t len, size_t *i, char c) {
    if (*i >= len || s[*i] != c)
        return -1;
    (*i)++;
    return 0;
}

static int days_in_month(int y, int m) {
    static const int D[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : D[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil, for years >= 0). */
static int64_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    int64_t era = y / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int tm_timestamp_parse(const char *s, size_t n, int64_t *us) {
    size_t i = 0;
    int y = digits(s, n, &i, 4);
    if (y < 0 || expect(s, n, &i, '-'))
        return -1;
    int mo = digits(s, n, &i, 2);
    if (mo < 1 || mo > 12 || expect(s, n, &i, '-'))
        return -1;
    int d = digits(s, n, &i, 2);
    if (d < 1 || d > days_in_month(y, mo))
        return -1;
    if (i >= n || (s[i] != 'T' && s[i] != 't' && s[i] != ' '))
        return -1;
    i++;
    int h = digits(s, n, &i, 2);
    if (h < 0 || h > 23 || expect(s, n, &i, ':'))
        return -1;
    int mi = digits(s, n, &i, 2);
    if (mi < 0 || mi > 59 || expect(s, n, &i, ':'))
        return -1;
    int sec = digits(s, n, &i, 2);
    if (sec < 0 || sec > 59)
        return -1;
    int64_t frac = 0;
    if (i < n && s[i] == '.') {
        i++;
        size_t start = i;
        int64_t scale = 100000;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, scale /= 10)
            frac += scale * (s[i] - '0'); /* scale reaches 0 past 6 digits */
        if (i == start)
            return -1;
    }
    int64_t offset_s = 0;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i] == '-' ? -1 : 1;
        i++;
        int oh = digits(s, n, &i, 2);
        if (oh < 0 || oh > 23 || expect(s, n, &i, ':'))
            return -1;
        int om = digits(s, n, &i, 2);
        if (om < 0 || om > 59)
            return -1;
        offset_s = sign * (oh * 3600 + om * 60);
    }
    if (i != n)
        return -1;
    /* Local time minus its offset from UTC is UTC. */
    int64_t secs =
        days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    *us = secs * 1000000 + frac;
    return 0;
}

int tm_timestamp_from_ms(int64_t ms, int64_t *us) {
    if (ms > INT64_MAX / 1000 || ms < INT64_MIN / 1000)
        return -1;
    *us = ms * 1000;
    return 0;
}

/* The inverse of days_from_civil (H. Hinnant's civil_from_days). */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

size_t tm_timestamp_format(int64_t us, char out[TM_TIMESTAMP_TEXT_MAX]) {
    /* floor division, so that times before 1970 keep a positive fraction */
    int64_t secs = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs--;
    }
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999)
        return 0;
    int n = snprintf(out, TM_TIMESTAMP_TEXT_MAX,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", (int)y, m, d,
                     (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60),
                     (int)frac);
    return n > 0 && n < TM_TIMESTAMP_TEXT_MAX ? (size_t)n : 0;
}
