/* watt top's full-screen view (ncurses), in the manner of htop and
 * powertop: a header with the node's power and wake-ups, a tab bar of
 * views, a scrolling table, a footer with the keys (docs/top.md).
 *
 * One thread, one loop: ppoll() on the terminal, the collector's ring
 * fds (drained when readable, so the kernel never drops events while we
 * wait) and a timeout to the next frame. SIGINT, SIGTERM, SIGHUP and
 * SIGWINCH are blocked outside ppoll() and let in only while it waits, so
 * none is lost between a check and the wait; every exit path ends
 * curses and gives the terminal back as it was. */
#include "config.h"

#include "view/top.h"

#include <errno.h>

#ifndef WATT_HAVE_CURSES

int top_tui_run(struct top_collector *c, struct top_tui_opts *o)
{
    return -ENOTSUP; /* built without ncurses */
}

#else

#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "cli/top_view.h"

#define MIN_COLS      60
#define MIN_LINES     12
#define HEADER_Y      1 /* the header block, under the title */
#define TABS_Y        (HEADER_Y + TOP_HEADER)
#define BODY_Y        (TABS_Y + 1)
#define INTERVAL_STEP 0.5
#define INTERVAL_MIN  0.5
#define INTERVAL_MAX  60.0
#define STATUS_NS     (4 * 1000000000ull) /* how long a message stays */

enum pair { P_LABEL = 1, P_TITLE, P_TAB, P_TAB_ON, P_HEAD, P_KEY, P_KEYTEXT, P_WARN };

struct tui {
    struct top_collector *c;
    struct top_tui_opts *o;
    struct top_frame *f;        /* the latest frame, sorted; NULL until the first */
    uint64_t start_ns, next_ns; /* monotonic: start, next frame due */
    size_t scroll[_TOP_VIEW_MAX];
    size_t body_rows; /* scrolling rows the last draw had room for */
    bool help, utf8, colour, dirty;
    char status[256];
    uint64_t status_until;
    struct pollfd *pfd;
    size_t npfd_cap;
    bool poll_collector; /* false after a ring fd errored, until the next frame */
};

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

/* ---- drawing helpers --------------------------------------------------------- */

static void style_on(const struct tui *t, enum pair p, attr_t plain)
{
    if (t->colour)
        attron(COLOR_PAIR(p));
    else
        attron(plain);
}

static void style_off(const struct tui *t, enum pair p, attr_t plain)
{
    if (t->colour)
        attroff(COLOR_PAIR(p));
    else
        attroff(plain);
}

/* TEXT at (Y, X), clipped to W columns and to the screen. */
static void put_clipped(const struct tui *t, int y, int x, int w, const char *text)
{
    if (x >= COLS || w <= 0)
        return;
    if (x + w > COLS)
        w = COLS - x;
    char buf[TOP_LINE];
    text_printable(buf, sizeof(buf), text, strlen(text), (size_t)w, t->utf8);
    mvaddstr(y, x, buf);
}

/* A whole-width bar (tabs, column headers, footer) in attribute P. */
static void fill_line(const struct tui *t, int y, enum pair p, attr_t plain)
{
    style_on(t, p, plain);
    mvhline(y, 0, ' ', COLS);
    style_off(t, p, plain);
}

/* ---- tables -------------------------------------------------------------- */

struct layout {
    size_t ncols;
    struct top_col col[TOP_MAX_COLS];
    int x[TOP_MAX_COLS], w[TOP_MAX_COLS];
};

/* Fixed columns at their widths, one space apart; the flex column (last)
 * takes what is left of the screen, at least its minimum. */
static void layout_view(const struct top_frame *f, enum top_view v, struct layout *L)
{
    L->ncols = top_view_cols(f, v, L->col);
    int x = 0, fixed = 0;
    for (size_t c = 0; c < L->ncols; c++)
        if (!L->col[c].flex)
            fixed += (int)L->col[c].width + 1;
    for (size_t c = 0; c < L->ncols; c++) {
        L->x[c] = x;
        L->w[c] = (int)L->col[c].width;
        if (L->col[c].flex && COLS - fixed > L->w[c])
            L->w[c] = COLS - fixed;
        x += L->w[c] + 1;
    }
}

static void put_cell(const struct tui *t, int y, const struct layout *L, size_t c, const char *s)
{
    int w = L->w[c], x = L->x[c];
    if (x >= COLS)
        return;
    int len = (int)text_width(s);
    if (L->col[c].right && len < w)
        x += w - len;
    put_clipped(t, y, x, L->w[c] - (x - L->x[c]), s);
}

static void draw_col_heads(const struct tui *t, int y, const struct layout *L)
{
    fill_line(t, y, P_HEAD, A_REVERSE);
    style_on(t, P_HEAD, A_REVERSE);
    for (size_t c = 0; c < L->ncols; c++)
        put_cell(t, y, L, c, L->col[c].head);
    style_off(t, P_HEAD, A_REVERSE);
}

/* Rows FIRST.. of view V from line Y to Y_END (excluded). */
static void draw_rows(const struct tui *t, enum top_view v, const struct layout *L, size_t first,
                      int y, int y_end)
{
    char(*cells)[TOP_CELL] = xmalloc(TOP_MAX_COLS * TOP_CELL);
    size_t n = top_view_nrows(t->f, v), flex = 0;
    for (size_t c = 0; c < L->ncols; c++)
        if (L->col[c].flex)
            flex = (size_t)L->w[c];
    for (size_t r = first; r < n && y < y_end; r++, y++) {
        top_view_row(t->f, v, r, t->utf8, flex, cells);
        for (size_t c = 0; c < L->ncols; c++)
            put_cell(t, y, L, c, cells[c]);
    }
    free(cells);
}

static size_t max_scroll(const struct tui *t, enum top_view v)
{
    size_t n = t->f ? top_view_nrows(t->f, v) : 0;
    return n > t->body_rows ? n - t->body_rows : 0;
}

/* The C-states view: the per-state summary (when it fits), then the
 * per-CPU grid, which scrolls. Returns the first line of the grid's rows. */
static int draw_cstates_summary(struct tui *t, int y, int y_end)
{
    size_t nst = top_view_nrows(t->f, TOP_VIEW_CSTATES);
    if (!nst || y_end - y < (int)nst + 4)
        return y;
    struct layout L;
    layout_view(t->f, TOP_VIEW_CSTATES, &L);
    draw_col_heads(t, y++, &L);
    draw_rows(t, TOP_VIEW_CSTATES, &L, 0, y, y_end);
    return y + (int)nst + 1;
}

/* Then the package rows (PMU package C-states, else their CPUs' mean),
 * when they fit with room left for the grid. */
static int draw_pkgs(struct tui *t, int y, int y_end)
{
    size_t n = top_view_nrows(t->f, TOP_VIEW_PKGS);
    if (!n || y_end - y < (int)n + 4)
        return y;
    struct layout L;
    layout_view(t->f, TOP_VIEW_PKGS, &L);
    draw_col_heads(t, y++, &L);
    draw_rows(t, TOP_VIEW_PKGS, &L, 0, y, y_end);
    return y + (int)n + 1;
}

static void draw_body(struct tui *t, int y, int y_end)
{
    enum top_view v = t->o->view;
    if (!t->f) {
        struct top_frame empty = {0};
        struct layout L;
        layout_view(&empty, v, &L);
        draw_col_heads(t, y, &L);
        t->body_rows = 0;
        return;
    }
    if (v == TOP_VIEW_CPUS) {
        y = draw_cstates_summary(t, y, y_end);
        y = draw_pkgs(t, y, y_end);
    }
    struct layout L;
    layout_view(t->f, v, &L);
    draw_col_heads(t, y++, &L);
    t->body_rows = y_end > y ? (size_t)(y_end - y) : 0;
    if (t->scroll[v] > max_scroll(t, v))
        t->scroll[v] = max_scroll(t, v);
    draw_rows(t, v, &L, t->scroll[v], y, y_end);
    if (!top_view_nrows(t->f, v) && y < y_end)
        put_clipped(t, y, 1, COLS - 1, "(nothing in this window)");
}

/* ---- header, tabs, footer --------------------------------------------------- */

static void draw_title(const struct tui *t)
{
    char left[TOP_LINE], right[128], when[16] = "";
    const struct top_frame *f = t->f;
    snprintf(left, sizeof(left), " watt top  %s  %s", f && f->hostname ? f->hostname : "",
             f && f->kernel ? f->kernel : "");
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        strftime(when, sizeof(when), "%H:%M:%S", &tm);
    snprintf(right, sizeof(right), "sort: %s  every %.1f s  %s ", top_sort_title(t->o->sort),
             t->o->interval_s, when);
    fill_line(t, 0, P_TITLE, A_BOLD);
    style_on(t, P_TITLE, A_BOLD);
    int rw = (int)strlen(right);
    put_clipped(t, 0, 0, COLS - rw - 1, left);
    if (COLS > rw)
        put_clipped(t, 0, COLS - rw, rw, right);
    style_off(t, P_TITLE, A_BOLD);
}

/* One header line: the 10-column label in colour, the rest plain. */
static void draw_header_line(const struct tui *t, int y, const char *line)
{
    char label[11];
    snprintf(label, sizeof(label), "%.10s", line);
    style_on(t, P_LABEL, A_BOLD);
    put_clipped(t, y, 1, 10, label);
    style_off(t, P_LABEL, A_BOLD);
    if (strlen(line) > 10)
        put_clipped(t, y, 11, COLS - 12, line + 10);
}

static void draw_header(const struct tui *t, uint64_t now)
{
    if (!t->f) {
        double left = t->next_ns > now ? (double)(t->next_ns - now) / 1e9 : 0;
        char msg[128];
        snprintf(msg, sizeof(msg), "%-10smeasuring%s (%.0f s)", "Power", t->utf8 ? "\u2026" : "...",
                 ceil(left));
        draw_header_line(t, HEADER_Y, msg);
        return;
    }
    char lines[TOP_HEADER][TOP_LINE];
    top_header_lines(t->f, t->utf8, lines);
    for (int i = 0; i < TOP_HEADER; i++)
        draw_header_line(t, HEADER_Y + i, lines[i]);
    /* what the numbers lack, in colour: not traced, events lost */
    if (!t->f->traced || t->f->lost_events || t->f->dropped_events) {
        style_on(t, P_WARN, A_BOLD);
        put_clipped(t, HEADER_Y + 2, 1, 10, "Wake-ups");
        style_off(t, P_WARN, A_BOLD);
    }
}

static void draw_tabs(const struct tui *t)
{
    fill_line(t, TABS_Y, P_TAB, A_NORMAL);
    int x = 0;
    for (int v = 0; v < _TOP_VIEW_MAX && x < COLS; v++) {
        char tab[64];
        snprintf(tab, sizeof(tab), " %d %s ", v + 1, top_view_title((enum top_view)v));
        bool on = v == (int)t->o->view;
        style_on(t, on ? P_TAB_ON : P_TAB, on ? A_REVERSE | A_BOLD : A_NORMAL);
        put_clipped(t, TABS_Y, x, COLS - x, tab);
        style_off(t, on ? P_TAB_ON : P_TAB, on ? A_REVERSE | A_BOLD : A_NORMAL);
        x += (int)strlen(tab) + 1;
    }
    if (t->f) {
        size_t n = top_view_nrows(t->f, t->o->view);
        char pos[64];
        size_t first = n ? t->scroll[t->o->view] + 1 : 0;
        size_t last = t->scroll[t->o->view] + t->body_rows;
        snprintf(pos, sizeof(pos), "%zu-%zu of %zu ", first, last < n ? last : n, n);
        int w = (int)strlen(pos);
        if (x + w < COLS)
            put_clipped(t, TABS_Y, COLS - w, w, pos);
    }
}

static void draw_footer(const struct tui *t, uint64_t now)
{
    static const char *const keys[][2] = {
        {"q", "Quit"},       {"Tab", "View"},      {"w/p/c/i", "Sort"},
        {"+/-", "Interval"}, {"Space", "Refresh"}, {"h", "Help"},
    };
    int y = LINES - 1, x = 0;
    move(y, 0);
    clrtoeol();
    for (size_t i = 0; i < ARRAY_SIZE(keys) && x < COLS; i++) {
        style_on(t, P_KEY, A_BOLD);
        put_clipped(t, y, x, COLS - x, keys[i][0]);
        style_off(t, P_KEY, A_BOLD);
        x += (int)strlen(keys[i][0]);
        style_on(t, P_KEYTEXT, A_REVERSE);
        put_clipped(t, y, x, COLS - x, keys[i][1]);
        style_off(t, P_KEYTEXT, A_REVERSE);
        x += (int)strlen(keys[i][1]) + 1;
    }
    char msg[300] = "";
    if (t->status[0] && now < t->status_until)
        snprintf(msg, sizeof(msg), "%s ", t->status);
    else if (t->f && t->f->nnotes)
        snprintf(msg, sizeof(msg), "%zu note%s: h ", t->f->nnotes, t->f->nnotes > 1 ? "s" : "");
    int w = (int)text_width(msg);
    if (w && x + 1 < COLS) {
        int room = COLS - x - 1, at = w < room ? COLS - w - 1 : x + 1;
        style_on(t, P_WARN, A_BOLD);
        put_clipped(t, y, at, COLS - at - 1, msg);
        style_off(t, P_WARN, A_BOLD);
    }
}

static const char *const help_text[] = {
    "watt top: who wakes the CPUs and what the node draws",
    "",
    "Tab, Shift-Tab, 1-5  switch views",
    "w p c i u            sort by wake-ups, power, CPU, idle wake-ups, GPU",
    "+ -                  refresh interval up/down by 0.5 s (0.5 to 60 s)",
    "Space                refresh now",
    "Up Down PgUp PgDn    scroll; Home, End: first, last row",
    "Ctrl-L               redraw",
    "q F10                quit; any other key closes this help",
    "",
    "Wake/s: times woken per second. Idle/s: times it took a CPU out of",
    "idle (needs tracepoints). Watts: the node's power split by CPU time",
    "weighted by frequency (docs/top.md).",
};

/* The frame's notes wrapped to COLS columns ("- " before each note's first
 * line, two blanks before the others): the help box shows them in full.
 * Returns the line count; *ret owned (text_wrap_free). */
static size_t note_lines(const struct top_frame *f, int cols, char ***ret)
{
    char **all = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; f && i < f->nnotes; i++) {
        char **lines;
        size_t k =
            text_wrap(f->notes[i] ? f->notes[i] : "", cols > 3 ? (size_t)cols - 2 : 1, &lines);
        for (size_t l = 0; l < k; l++) {
            all = grow_array(all, sizeof(*all), n, &cap);
            all[n++] = xasprintf("%s%s", l ? "  " : "- ", lines[l]);
        }
        text_wrap_free(lines, k);
    }
    *ret = all;
    return n;
}

static void draw_help(const struct tui *t)
{
    int w = COLS - 4 < 76 ? COLS - 4 : 76;
    char **notes;
    size_t nnotes = note_lines(t->f, w - 4, &notes);
    /* Notes that do not fit beside the key help push it out (but for its
     * first and its closing line): the keys are in docs/top.md, the notes
     * are this frame's and nowhere else. */
    const char *keys[ARRAY_SIZE(help_text)];
    size_t nk = 0;
    bool brief = nnotes && ARRAY_SIZE(help_text) + nnotes + 4 > (size_t)(LINES > 2 ? LINES - 2 : 0);
    for (size_t i = 0; i < ARRAY_SIZE(help_text); i++)
        if (!brief || i == 0 || strstr(help_text[i], "closes this help"))
            keys[nk++] = help_text[i];
    size_t n = nk + (nnotes ? nnotes + 2 : 0);
    int h = (int)n + 2 < LINES - 2 ? (int)n + 2 : LINES - 2;
    int y0 = (LINES - h) / 2, x0 = (COLS - w) / 2;
    for (int y = y0; y < y0 + h; y++)
        mvhline(y, x0, ' ', w);
    /* line drawing outside UTF-8 depends on the terminal's alternate
     * character set, which not every emulator honours: ASCII there */
    chtype hl = t->utf8 ? ACS_HLINE : '-', vl = t->utf8 ? ACS_VLINE : '|';
    style_on(t, P_LABEL, A_BOLD);
    mvhline(y0, x0, hl, w);
    mvhline(y0 + h - 1, x0, hl, w);
    mvvline(y0, x0, vl, h);
    mvvline(y0, x0 + w - 1, vl, h);
    mvaddch(y0, x0, t->utf8 ? ACS_ULCORNER : '+');
    mvaddch(y0, x0 + w - 1, t->utf8 ? ACS_URCORNER : '+');
    mvaddch(y0 + h - 1, x0, t->utf8 ? ACS_LLCORNER : '+');
    mvaddch(y0 + h - 1, x0 + w - 1, t->utf8 ? ACS_LRCORNER : '+');
    style_off(t, P_LABEL, A_BOLD);
    int y = y0 + 1;
    for (size_t i = 0; i < nk && y < y0 + h - 1; i++)
        put_clipped(t, y++, x0 + 2, w - 4, keys[i]);
    if (nnotes && y + 1 < y0 + h - 1) {
        put_clipped(t, ++y, x0 + 2, w - 4, "Notes:");
        y++;
    }
    for (size_t i = 0; i < nnotes && y < y0 + h - 1; i++)
        put_clipped(t, y++, x0 + 2, w - 4, notes[i]);
    text_wrap_free(notes, nnotes);
}

static void draw(struct tui *t, uint64_t now)
{
    erase();
    if (COLS < MIN_COLS || LINES < MIN_LINES) {
        char msg[64];
        snprintf(msg, sizeof(msg), "%dx%d, needs %dx%d", COLS, LINES, MIN_COLS, MIN_LINES);
        put_clipped(t, 0, 0, COLS, "Terminal too small");
        put_clipped(t, 1, 0, COLS, msg);
        put_clipped(t, 2, 0, COLS, "q quits");
    } else {
        draw_title(t);
        draw_header(t, now);
        draw_body(t, BODY_Y, LINES - 1);
        draw_tabs(t); /* after the body: it shows the rows the body had room for */
        draw_footer(t, now);
        if (t->help)
            draw_help(t);
    }
    refresh();
    t->dirty = false;
}

/* ---- frames and keys --------------------------------------------------------- */

static void set_status(struct tui *t, uint64_t now, const char *msg)
{
    snprintf(t->status, sizeof(t->status), "%s", msg);
    t->status_until = now + STATUS_NS;
}

static void take_frame(struct tui *t, uint64_t now)
{
    struct top_frame *f = NULL;
    int r = top_collector_frame(t->c, &f);
    uint64_t step = (uint64_t)(t->o->interval_s * 1e9);
    t->next_ns = now + step;
    t->poll_collector = true;
    t->dirty = true;
    if (r < 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "cannot build a frame: %s", strerror(-r));
        set_status(t, now, msg);
        return;
    }
    if (!f)
        return;
    top_frame_sort(f, t->o->sort);
    top_frame_free(t->f);
    t->f = f;
}

static void set_interval(struct tui *t, uint64_t now, double s)
{
    s = s < INTERVAL_MIN ? INTERVAL_MIN : s > INTERVAL_MAX ? INTERVAL_MAX : s;
    /* the next frame moves with it: due one new interval after the last */
    uint64_t last = t->next_ns - (uint64_t)(t->o->interval_s * 1e9);
    t->o->interval_s = s;
    t->next_ns = last + (uint64_t)(s * 1e9);
    char msg[64];
    snprintf(msg, sizeof(msg), "refresh every %.1f s", s);
    set_status(t, now, msg);
}

static void set_sort(struct tui *t, enum top_sort s)
{
    t->o->sort = s;
    if (t->f)
        top_frame_sort(t->f, s);
}

static void scroll_by(struct tui *t, long d)
{
    enum top_view v = t->o->view;
    long s = (long)t->scroll[v] + d, max = (long)max_scroll(t, v);
    t->scroll[v] = (size_t)(s < 0 ? 0 : s > max ? max : s);
}

static bool view_key(struct tui *t, int ch)
{
    long page = t->body_rows > 1 ? (long)t->body_rows - 1 : 1;
    switch (ch) {
    case '\t':
        t->o->view = (enum top_view)((t->o->view + 1) % _TOP_VIEW_MAX);
        return true;
    case KEY_BTAB:
        t->o->view = (enum top_view)((t->o->view + _TOP_VIEW_MAX - 1) % _TOP_VIEW_MAX);
        return true;
    case KEY_UP:
    case 'k':
        scroll_by(t, -1);
        return true;
    case KEY_DOWN:
    case 'j':
        scroll_by(t, 1);
        return true;
    case KEY_PPAGE:
        scroll_by(t, -page);
        return true;
    case KEY_NPAGE:
        scroll_by(t, page);
        return true;
    case KEY_HOME:
    case 'g':
        t->scroll[t->o->view] = 0;
        return true;
    case KEY_END:
    case 'G':
        t->scroll[t->o->view] = max_scroll(t, t->o->view);
        return true;
    }
    if (ch >= '1' && ch < '1' + _TOP_VIEW_MAX) {
        t->o->view = (enum top_view)(ch - '1');
        return true;
    }
    return false;
}

/* Returns false to quit. */
static bool handle_key(struct tui *t, int ch, uint64_t now)
{
    static const struct {
        int key;
        enum top_sort sort;
    } sorts[] = {{'w', TOP_SORT_WAKEUPS},
                 {'p', TOP_SORT_POWER},
                 {'c', TOP_SORT_CPU},
                 {'i', TOP_SORT_IDLE_WAKEUPS},
                 {'u', TOP_SORT_GPU}};
    if (ch == 'q' || ch == 'Q' || ch == KEY_F(10))
        return false;
    t->dirty = true;
    if (t->help && ch != KEY_RESIZE) { /* any other key closes the help */
        t->help = false;
        return true;
    }
    for (size_t i = 0; i < ARRAY_SIZE(sorts); i++)
        if (ch == sorts[i].key) {
            set_sort(t, sorts[i].sort);
            return true;
        }
    if (view_key(t, ch))
        return true;
    switch (ch) {
    case '+':
    case '=':
        set_interval(t, now, t->o->interval_s + INTERVAL_STEP);
        break;
    case '-':
        set_interval(t, now, t->o->interval_s - INTERVAL_STEP);
        break;
    case ' ':
        t->next_ns = now; /* a frame now: the window since the last one */
        break;
    case 'h':
    case '?':
    case KEY_F(1):
        t->help = true;
        break;
    case 12: /* Ctrl-L */
        clearok(curscr, TRUE);
        break;
    }
    return true;
}

/* ---- the loop ------------------------------------------------------------------ */

/* The ppoll() timeout: the next frame, or sooner to count down the
 * first frame's wait or clear a message. */
static struct timespec wait_for(const struct tui *t, uint64_t now)
{
    uint64_t until = t->next_ns;
    if (!t->f && until > now + 1000000000ull)
        until = now + 1000000000ull - (until - now) % 1000000000ull;
    if (t->status[0] && t->status_until > now && t->status_until < until)
        until = t->status_until;
    uint64_t d = until > now ? until - now : 0;
    return (struct timespec){.tv_sec = (time_t)(d / 1000000000u),
                             .tv_nsec = (long)(d % 1000000000u)};
}

static size_t build_pollfds(struct tui *t)
{
    const int *fds = NULL;
    size_t n = t->poll_collector ? top_collector_fds(t->c, &fds) : 0;
    if (n + 1 > t->npfd_cap) {
        t->npfd_cap = n + 1;
        t->pfd = xrealloc(t->pfd, t->npfd_cap * sizeof(*t->pfd));
    }
    t->pfd[0] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
    for (size_t i = 0; i < n; i++)
        t->pfd[i + 1] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    return n + 1;
}

/* Wait for a key, a ring or the next deadline. Returns < 0 on an error
 * ppoll() should not have (EINTR is a signal: the caller looks). */
static int wait_events(struct tui *t, const sigset_t *waitmask)
{
    uint64_t now = now_monotonic_ns();
    size_t n = build_pollfds(t);
    struct timespec ts = wait_for(t, now);
    int r = ppoll(t->pfd, n, &ts, waitmask);
    if (r < 0)
        return errno == EINTR ? 0 : -errno;
    if (t->pfd[0].revents & (POLLHUP | POLLERR | POLLNVAL))
        return -EIO; /* the terminal went away */
    bool ready = false;
    for (size_t i = 1; i < n; i++) {
        if (t->pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL))
            t->poll_collector = false; /* a ring that cannot be read: the frame will say */
        ready |= t->pfd[i].revents & POLLIN;
    }
    if (ready)
        top_collector_drain(t->c);
    return 0;
}

static int run_loop(struct tui *t, const sigset_t *waitmask)
{
    for (;;) {
        uint64_t now = now_monotonic_ns();
        int ch;
        while ((ch = getch()) != ERR)
            if (!handle_key(t, ch, now))
                return 0;
        if (stop_signal)
            return 0;
        if (now >= t->next_ns) {
            take_frame(t, now);
            now = now_monotonic_ns();
        }
        /* redraw on changes, each second of the first wait, and when a
         * message times out; ncurses sends only what changed */
        if (t->dirty || !t->f || (t->status[0] && now >= t->status_until)) {
            if (t->status[0] && now >= t->status_until)
                t->status[0] = '\0';
            draw(t, now);
        }
        int r = wait_events(t, waitmask);
        if (r < 0)
            return r;
        if (stop_signal)
            return 0;
    }
}

static void init_colours(struct tui *t)
{
    const char *nc = getenv("NO_COLOR"); /* no-color.org: set and not empty */
    t->colour = has_colors() && !(nc && nc[0]);
    if (!t->colour)
        return;
    start_color();
    use_default_colors();
    init_pair(P_LABEL, COLOR_CYAN, -1);
    init_pair(P_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(P_TAB, -1, -1);
    init_pair(P_TAB_ON, COLOR_BLACK, COLOR_GREEN);
    init_pair(P_HEAD, COLOR_BLACK, COLOR_GREEN);
    init_pair(P_KEY, -1, -1);
    init_pair(P_KEYTEXT, COLOR_BLACK, COLOR_CYAN);
    init_pair(P_WARN, COLOR_YELLOW, -1);
}

struct saved {
    struct sigaction sa[3];
    sigset_t mask;
    char *locale;
};

static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};

/* Catch the stop signals into a flag and block them (and SIGWINCH) but
 * in ppoll(); ncurses installs its SIGWINCH handler only where the
 * disposition is the default, and leaves ours alone. */
static void signals_take(struct saved *s, sigset_t *waitmask)
{
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++) {
        sigaction(stop_signals[i], &sa, &s->sa[i]);
        sigaddset(&block, stop_signals[i]);
    }
    sigaddset(&block, SIGWINCH);
    sigprocmask(SIG_BLOCK, &block, &s->mask);
    *waitmask = s->mask;
    for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
        sigdelset(waitmask, stop_signals[i]);
    sigdelset(waitmask, SIGWINCH);
}

static void signals_give_back(struct saved *s)
{
    sigprocmask(SIG_SETMASK, &s->mask, NULL);
    for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
        sigaction(stop_signals[i], &s->sa[i], NULL);
}

/* Wide characters only with ncursesw in a UTF-8 locale; else ASCII. The
 * locale's LC_CTYPE only: numbers keep the C locale's decimal point. */
static bool locale_take(struct saved *s)
{
    const char *old = setlocale(LC_CTYPE, NULL);
    s->locale = old ? xstrdup(old) : NULL;
    setlocale(LC_CTYPE, "");
#ifdef WATT_HAVE_CURSESW
    return streq(nl_langinfo(CODESET), "UTF-8");
#else
    return false;
#endif
}

/* A full screen needs cursor addressing: "dumb" and hard-copy terminals
 * have none, and curses would scroll line by line there. */
static bool can_draw(void)
{
    char *cup = tigetstr("cup");
    return cup && cup != (char *)-1;
}

int top_tui_run(struct top_collector *c, struct top_tui_opts *o)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return -ENOTTY;
    if (!(o->interval_s >= INTERVAL_MIN))
        o->interval_s = INTERVAL_MIN;
    if (o->interval_s > INTERVAL_MAX)
        o->interval_s = INTERVAL_MAX;
    if ((unsigned)o->view >= _TOP_VIEW_MAX)
        o->view = TOP_VIEW_PROCS;
    struct saved s = {0};
    sigset_t waitmask;
    struct tui t = {.c = c, .o = o, .poll_collector = true, .dirty = true};
    t.utf8 = locale_take(&s);
    stop_signal = 0;
    signals_take(&s, &waitmask);
    SCREEN *scr = newterm(NULL, stdout, stdin);
    int r = -ENOTSUP; /* a terminal curses cannot drive (TERM unset, unknown) */
    if (scr) {
        set_term(scr);
        r = can_draw() ? 0 : -ENOTSUP;
    }
    if (r == 0) {
        cbreak();
        noecho();
        nonl();
        keypad(stdscr, TRUE);
        nodelay(stdscr, TRUE); /* never block in getch(): ppoll() waits */
        curs_set(0);
        init_colours(&t);
        t.start_ns = now_monotonic_ns();
        t.next_ns = t.start_ns + (uint64_t)(o->interval_s * 1e9);
        r = run_loop(&t, &waitmask);
    }
    if (scr) {
        endwin();
        delscreen(scr);
    }
    signals_give_back(&s);
    setlocale(LC_CTYPE, s.locale ? s.locale : "C");
    free(s.locale);
    top_frame_free(t.f);
    free(t.pfd);
    return r;
}

#endif
