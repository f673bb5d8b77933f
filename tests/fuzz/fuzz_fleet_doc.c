/* Fuzz target: agent/fleet_doc.h, fleet_doc_convert() (the fleet
 * controller's metrics file as the agent serves it).
 *
 * Refused: -EINVAL, a message "line N: ..." and no documents. Accepted:
 * both documents end in a newline (or are empty), have no blank line and
 * only HELP/TYPE comments and watt_fleet_* samples; OpenMetrics has no
 * "untyped" and no "# EOF" (the agent adds it); and the conversion is
 * idempotent: the text document converts to itself and the same
 * OpenMetrics. */
#include <errno.h>
#include <stdbool.h>

#include "agent/fleet_doc.h"
#include "fuzz.h"

static void check_lines(const char *doc)
{
    size_t n = strlen(doc);
    FUZZ_CHECK(n == 0 || doc[n - 1] == '\n');
    for (const char *s = doc; *s;) {
        size_t len = strcspn(s, "\n");
        FUZZ_CHECK(len > 0);
        FUZZ_CHECK(strncmp(s, "# HELP watt_fleet_", 18) == 0 ||
                   strncmp(s, "# TYPE watt_fleet_", 18) == 0 || strncmp(s, "watt_fleet_", 11) == 0);
        s += len + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = (char *)0x1, *om = (char *)0x1, *err = NULL;
    int r = fleet_doc_convert((const char *)data, size, &text, &om, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err && strncmp(err, "line ", 5) == 0);
        FUZZ_CHECK(text == (char *)0x1 && om == (char *)0x1);
        free(err);
        return 0;
    }
    FUZZ_CHECK(r == 0 && !err);
    check_lines(text);
    check_lines(om);
    FUZZ_CHECK(!strstr(om, " untyped\n") && !strstr(om, "# EOF"));
    char *text2, *om2;
    FUZZ_CHECK(fleet_doc_convert(text, strlen(text), &text2, &om2, &err) == 0);
    FUZZ_CHECK(strcmp(text, text2) == 0 && strcmp(om, om2) == 0);
    free(text2);
    free(om2);
    free(text);
    free(om);
    return 0;
}
