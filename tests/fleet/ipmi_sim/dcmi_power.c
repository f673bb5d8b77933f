/*
 * dcmi_power.so - loadlib module for OpenIPMI ipmi_sim 2.0.33 (Debian 12)
 * Adds DCMI "Get Power Reading" (netfn 0x2c, cmd 0x02, group 0xdc) so that
 * `ipmitool dcmi power reading` works against the simulator.
 *
 * lan.conf:   loadlib "/path/dcmi_power.so" "/path/watts.txt"
 * watts.txt holds an integer (W) re-read on every request; default 150 W.
 * When chassis power is off (per chassis_control), the reading is 0 W.
 * "none" in watts.txt: 0 W with the reading state "no measurement available"
 * (bit 6 of byte 18 clear), as a BMC without a power meter answers.
 *
 * Build: gcc -shared -fPIC -O2 -o dcmi_power.so dcmi_power.c
 * Written for the watt project (issue 7); no OpenIPMI code or headers: msg_t
 * below is declared to match the layout of lanserv/OpenIPMI/msg.h v2.0.33.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct lmc_data_s lmc_data_t;
typedef struct sys_data_s sys_data_t;
typedef struct channel_s channel_t;

typedef struct msg_s { /* must match lanserv/OpenIPMI/msg.h (2.0.33) */
    void *src_addr;
    int src_len;
    long oem_data;
    unsigned char channel;
    channel_t *orig_channel;
    unsigned char authtype;
    uint32_t seq;
    uint32_t sid;
    union {
        struct {
            unsigned char *authcode;
            unsigned char authcode_data[16];
        } rmcp;
        struct {
            unsigned char payload, encrypted, authenticated, iana[3];
            uint16_t payload_id;
            unsigned char *authdata;
            unsigned int authdata_len;
        } rmcpp;
    };
    unsigned char netfn, rs_addr, rs_lun, rq_addr, rq_lun, rq_seq, cmd;
    unsigned char *data;
    unsigned int len;
    uint32_t iana;
    struct msg_s *next;
} msg_t;

typedef void (*cmd_handler_f)(lmc_data_t *mc, msg_t *msg, unsigned char *rdata,
                              unsigned int *rdata_len, void *cb_data);
/* exported by the ipmi_sim executable */
void ipmi_emu_register_group_extension_handler(uint8_t ge, cmd_handler_f h, void *cb);
int ipmi_mc_is_power_on(lmc_data_t *mc);

#define DCMI_GROUP 0xdc
static char watts_file[512];
static unsigned int n_samples, min_w = 0xffff, max_w;
static unsigned long sum_w;

/* Watts from the file; sets *active to 0 when it says "none". */
static unsigned int read_watts(int *active)
{
    unsigned int w = 150;
    char word[16] = "";
    FILE *f;
    *active = 1;
    if (watts_file[0] && (f = fopen(watts_file, "r"))) {
        if (fscanf(f, "%15s", word) == 1 && strcmp(word, "none") == 0) {
            *active = 0;
            w = 0;
        } else if (sscanf(word, "%u", &w) != 1)
            w = 150;
        fclose(f);
    }
    return w > 0xffff ? 0xffff : w;
}

static void put16(unsigned char *p, unsigned int v)
{
    p[0] = v & 0xff;
    p[1] = (v >> 8) & 0xff;
}
static void put32(unsigned char *p, uint32_t v)
{
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

static void dcmi_handler(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                         void *cb_data)
{
    (void)cb_data;
    if (msg->cmd == 0x02) { /* Get Power Reading */
        if (msg->len < 4) {
            rdata[0] = 0xc7;
            *rdata_len = 1;
            return;
        }
        if (msg->data[1] != 0x01) {
            rdata[0] = 0xcc;
            *rdata_len = 1;
            return;
        } /* only mode 1 */
        int active = 1;
        unsigned int w = read_watts(&active);
        if (ipmi_mc_is_power_on(mc) != 1)
            w = 0;
        n_samples++;
        sum_w += w;
        if (w < min_w)
            min_w = w;
        if (w > max_w)
            max_w = w;
        rdata[0] = 0x00; /* completion code */
        rdata[1] = DCMI_GROUP;
        put16(rdata + 2, w);                                 /* current */
        put16(rdata + 4, min_w);                             /* minimum */
        put16(rdata + 6, max_w);                             /* maximum */
        put16(rdata + 8, (unsigned int)(sum_w / n_samples)); /* average */
        put32(rdata + 10, (uint32_t)time(NULL));             /* IPMI timestamp */
        put32(rdata + 14, 1000);                             /* sampling period, ms */
        rdata[18] = active ? 0x40 : 0x00;                    /* power measurement active */
        *rdata_len = 19;
        return;
    }
    if (msg->cmd == 0x01 && msg->len >= 2 &&
        msg->data[1] == 0x01) { /* Get DCMI Capabilities, param 1 */
        unsigned char r[] = {0x00, DCMI_GROUP, 0x01, 0x05, 0x02, 0x00, 0x01, 0x00, 0x08};
        memcpy(rdata, r, sizeof r); /* DCMI 1.5, power mgmt supported, primary LAN */
        *rdata_len = sizeof r;
        return;
    }
    rdata[0] = 0xc1; /* invalid command */
    *rdata_len = 1;
}

int ipmi_sim_module_print_version(sys_data_t *sys, char *initstr)
{
    (void)sys;
    (void)initstr;
    printf("dcmi_power module 0.1\n");
    return 0;
}

int ipmi_sim_module_init(sys_data_t *sys, const char *initstr)
{
    (void)sys;
    if (initstr)
        snprintf(watts_file, sizeof watts_file, "%s", initstr);
    ipmi_emu_register_group_extension_handler(DCMI_GROUP, dcmi_handler, NULL);
    return 0;
}
