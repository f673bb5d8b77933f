/* sense/freeipmi_abi.h against the real <freeipmi/freeipmi.h>: every
 * value watt declares for its dlopen()ed libfreeipmi must be the
 * library's own. A compile-time check (built only where the headers are,
 * -Dfleet); run, it prints the soname it checked. Also checks that the
 * function types take what the real prototypes take. */
#include <freeipmi/freeipmi.h>
#include <stdio.h>

#include "sense/freeipmi_abi.h"

#define SAME(ours, theirs) _Static_assert((long)(ours) == (long)(theirs), #ours " != " #theirs)

SAME(FI_ERR_PERMISSION, IPMI_ERR_PERMISSION);
SAME(FI_ERR_USERNAME_INVALID, IPMI_ERR_USERNAME_INVALID);
SAME(FI_ERR_PASSWORD_INVALID, IPMI_ERR_PASSWORD_INVALID);
SAME(FI_ERR_K_G_INVALID, IPMI_ERR_K_G_INVALID);
SAME(FI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT, IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT);
SAME(FI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED, IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED);
SAME(FI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE, IPMI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE);
SAME(FI_ERR_CIPHER_SUITE_ID_UNAVAILABLE, IPMI_ERR_CIPHER_SUITE_ID_UNAVAILABLE);
SAME(FI_ERR_IPMI_2_0_UNAVAILABLE, IPMI_ERR_IPMI_2_0_UNAVAILABLE);
SAME(FI_ERR_CONNECTION_TIMEOUT, IPMI_ERR_CONNECTION_TIMEOUT);
SAME(FI_ERR_SESSION_TIMEOUT, IPMI_ERR_SESSION_TIMEOUT);
SAME(FI_ERR_DEVICE_NOT_SUPPORTED, IPMI_ERR_DEVICE_NOT_SUPPORTED);
SAME(FI_ERR_DEVICE_NOT_FOUND, IPMI_ERR_DEVICE_NOT_FOUND);
SAME(FI_ERR_DRIVER_BUSY, IPMI_ERR_DRIVER_BUSY);
SAME(FI_ERR_DRIVER_TIMEOUT, IPMI_ERR_DRIVER_TIMEOUT);
SAME(FI_ERR_MESSAGE_TIMEOUT, IPMI_ERR_MESSAGE_TIMEOUT);
SAME(FI_ERR_COMMAND_INVALID_FOR_SELECTED_INTERFACE,
     IPMI_ERR_COMMAND_INVALID_FOR_SELECTED_INTERFACE);
SAME(FI_ERR_COMMAND_INVALID_OR_UNSUPPORTED, IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED);
SAME(FI_ERR_BAD_COMPLETION_CODE, IPMI_ERR_BAD_COMPLETION_CODE);
SAME(FI_ERR_BMC_BUSY, IPMI_ERR_BMC_BUSY);
SAME(FI_ERR_OUT_OF_MEMORY, IPMI_ERR_OUT_OF_MEMORY);
SAME(FI_ERR_HOSTNAME_INVALID, IPMI_ERR_HOSTNAME_INVALID);
SAME(FI_ERR_PARAMETERS, IPMI_ERR_PARAMETERS);
SAME(FI_DEVICE_OPENIPMI, IPMI_DEVICE_OPENIPMI);
SAME(FI_FLAGS_DEFAULT, IPMI_FLAGS_DEFAULT);
SAME(FI_PRIVILEGE_LEVEL_ADMIN, IPMI_PRIVILEGE_LEVEL_ADMIN);
SAME(FI_WORKAROUND_FLAGS_DEFAULT, IPMI_WORKAROUND_FLAGS_DEFAULT);
SAME(FI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIV,
     IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE);
SAME(FI_NET_FN_GROUP_EXTENSION_RQ, IPMI_NET_FN_GROUP_EXTENSION_RQ);
SAME(FI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS,
     IPMI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS);
SAME(FI_DCMI_POWER_READING_STATE_POWER_MEASUREMENT_ACTIVE,
     IPMI_DCMI_POWER_READING_STATE_POWER_MEASUREMENT_ACTIVE);
SAME(FI_ERR_STR_MAX_LEN, IPMI_ERR_STR_MAX_LEN);
_Static_assert(sizeof(enum ipmi_driver_type) == sizeof(int), "ipmi_driver_type_t is not an int");

int main(void)
{
    /* The real prototypes' parameters, through our pointer types: a
     * mismatch in count or a pointer's type is a compile error here. */
    int (*errnum)(ipmi_ctx_t) = ipmi_ctx_errnum;
    int (*get)(fiid_obj_t, const char *, uint64_t *) = FIID_OBJ_GET;
    int (*pw)(ipmi_ctx_t, uint8_t, uint8_t, fiid_obj_t) = ipmi_cmd_dcmi_get_power_reading;
    int (*cc)(fiid_obj_t, uint8_t, char *, size_t) = ipmi_completion_code_dcmi_strerror_cmd_r;
    int (*oob)(ipmi_ctx_t, const char *, const char *, const char *, const unsigned char *,
               unsigned, uint8_t, uint8_t, unsigned, unsigned, unsigned, unsigned) =
        ipmi_ctx_open_outofband_2_0;
    (void)errnum, (void)get, (void)pw, (void)cc, (void)oob;
    printf("1..1\nok 1 - sense/freeipmi_abi.h matches <freeipmi/freeipmi.h> (%s)\n", FI_LIBRARY);
    return 0;
}
