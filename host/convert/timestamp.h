/* Timestamp texts of json-mode columns, to microseconds since 1970-01-01
 * UTC (tm_type TM_TYPE_TIMESTAMP). */
#ifndef TM_TIMESTAMP_H
#define TM_TIMESTAMP_H

#include <stddef.h>
#include <stdint.h>

/* Accepts RFC 3339 date-times and the common ISO-8601 variant:
 *   YYYY-MM-DD(T|t| )HH:MM:SS[.fraction][Z|z|+HH:MM|-HH:MM]
 * No zone means UTC ("2024-05-01 12:00:00"). The fraction may have any
 * number of digits; past the sixth (microseconds) they are cut off.
 * Fields are range-checked (months, days of the month with leap years,
 * hours 00-23, minutes 00-59, seconds 00-59: a leap second "60" is
 * refused). 0 and *us set, or -1 when s[0..n) is not such a text. */
int tm_timestamp_parse(const char *s, size_t n, int64_t *us);

/* Epoch milliseconds to microseconds; -1 when it does not fit. */
int tm_timestamp_from_ms(int64_t ms, int64_t *us);

/* Microseconds since 1970-01-01 UTC as the RFC 3339 text
 * tm_timestamp_parse reads back to the same value
 * ("2024-05-01T12:00:00.123456Z"), years 0000 to 9999; the text's length,
 * or 0 when the year is outside them. out has TM_TIMESTAMP_TEXT_MAX
 * bytes. */
#define TM_TIMESTAMP_TEXT_MAX 32
size_t tm_timestamp_format(int64_t us, char out[TM_TIMESTAMP_TEXT_MAX]);

#endif
