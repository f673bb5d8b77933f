#pragma once
/* The part of libfreeipmi's ABI (soname libfreeipmi.so.17, FreeIPMI 1.x)
 * that sense/dcmi_power.c calls, declared here so that watt builds without
 * the freeipmi headers and dlopen()s the library at run time: `watt` and
 * its agent never link libfreeipmi. Values as in <freeipmi/freeipmi.h>
 * (api/ipmi-api.h, api/ipmi-dcmi-cmds-api.h, cmds/ipmi-dcmi-cmds.h,
 * fiid/fiid.h, interface/ipmi-rmcpplus-interface.h,
 * util/ipmi-error-dcmi-util.h); tests/fleet/freeipmi_abi_check.c compares
 * every one with the real headers where they are installed. Prefixed FI_
 * so that the check can include both. */

#include <stddef.h>
#include <stdint.h>

#define FI_LIBRARY "libfreeipmi.so.17"

typedef struct fi_ctx *fi_ctx_t;     /* ipmi_ctx_t: opaque */
typedef struct fi_obj *fi_obj_t;     /* fiid_obj_t: opaque */
typedef const void *fi_template_ptr; /* fiid_template_t: an array of fields;
                                      * only its address is passed */

/* enum ipmi_errnum (api/ipmi-api.h) */
enum {
    FI_ERR_PERMISSION = 3,
    FI_ERR_USERNAME_INVALID = 4,
    FI_ERR_PASSWORD_INVALID = 5,
    FI_ERR_K_G_INVALID = 6,
    FI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT = 7,
    FI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED = 8,
    FI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE = 9,
    FI_ERR_CIPHER_SUITE_ID_UNAVAILABLE = 10,
    FI_ERR_IPMI_2_0_UNAVAILABLE = 12,
    FI_ERR_CONNECTION_TIMEOUT = 13,
    FI_ERR_SESSION_TIMEOUT = 14,
    FI_ERR_DEVICE_NOT_SUPPORTED = 17,
    FI_ERR_DEVICE_NOT_FOUND = 18,
    FI_ERR_DRIVER_BUSY = 19,
    FI_ERR_DRIVER_TIMEOUT = 20,
    FI_ERR_MESSAGE_TIMEOUT = 21,
    FI_ERR_COMMAND_INVALID_FOR_SELECTED_INTERFACE = 22,
    FI_ERR_COMMAND_INVALID_OR_UNSUPPORTED = 23,
    FI_ERR_BAD_COMPLETION_CODE = 24,
    FI_ERR_BMC_BUSY = 27,
    FI_ERR_OUT_OF_MEMORY = 28,
    FI_ERR_HOSTNAME_INVALID = 29,
    FI_ERR_PARAMETERS = 30,
};

#define FI_DEVICE_OPENIPMI                                   7 /* enum ipmi_driver_type */
#define FI_FLAGS_DEFAULT                                     0x00000000u
#define FI_PRIVILEGE_LEVEL_ADMIN                             0x04
#define FI_WORKAROUND_FLAGS_DEFAULT                          0x00000000u
#define FI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIV  0x00000010u
#define FI_NET_FN_GROUP_EXTENSION_RQ                         0x2C
#define FI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS   0x01
#define FI_DCMI_POWER_READING_STATE_POWER_MEASUREMENT_ACTIVE 0x1
#define FI_ERR_STR_MAX_LEN                                   2048

/* The calls, as function pointer types (same order as in dcmi_power.c's
 * table). */
typedef fi_ctx_t (*fi_ctx_create_fn)(void);
typedef int (*fi_ctx_errnum_fn)(fi_ctx_t ctx);
typedef char *(*fi_ctx_errormsg_fn)(fi_ctx_t ctx);
typedef int (*fi_ctx_open_inband_fn)(fi_ctx_t ctx, int driver_type, int disable_auto_probe,
                                     uint16_t driver_address, uint8_t register_spacing,
                                     const char *driver_device, unsigned workaround_flags,
                                     unsigned flags);
typedef int (*fi_ctx_open_outofband_2_0_fn)(fi_ctx_t ctx, const char *hostname,
                                            const char *username, const char *password,
                                            const unsigned char *k_g, unsigned k_g_len,
                                            uint8_t privilege_level, uint8_t cipher_suite_id,
                                            unsigned session_timeout,
                                            unsigned retransmission_timeout,
                                            unsigned workaround_flags, unsigned flags);
typedef int (*fi_ctx_close_fn)(fi_ctx_t ctx);
typedef void (*fi_ctx_destroy_fn)(fi_ctx_t ctx);
typedef int (*fi_rmcpplus_init_fn)(void);
typedef fi_obj_t (*fi_obj_create_fn)(fi_template_ptr tmpl);
typedef void (*fi_obj_destroy_fn)(fi_obj_t obj);
/* FIID_OBJ_GET: 1 when the field is set, 0 when not, -1 on error */
typedef int (*fi_obj_get_fn)(fi_obj_t obj, const char *field, uint64_t *val);
typedef int (*fi_cmd_dcmi_get_power_reading_fn)(fi_ctx_t ctx, uint8_t mode, uint8_t mode_attributes,
                                                fi_obj_t obj_cmd_rs);
typedef int (*fi_completion_code_dcmi_strerror_cmd_r_fn)(fi_obj_t obj_cmd, uint8_t netfn,
                                                         char *errstr, size_t len);
