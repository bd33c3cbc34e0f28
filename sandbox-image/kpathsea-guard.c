/*
 * texfleet: kpathsea's rule for the names TeX reads, for the TeX Lives whose kpathsea does not
 * keep it whole.
 *
 * TeX Live 2026's kpathsea answers every "may this file be read?" with yes, whatever
 * `openin_any` says. Landlock keeps the reads themselves to the trees and the job, but not
 * `stat(2)`: pdfTeX's `\pdffilesize` and `\pdffilemoddate` (XeTeX's `\filesize`,
 * `\filemoddate`) ask kpathsea first, then stat the name, so a document learned whether any
 * path of the container exists, its size and its date. Preloaded into every program of such an
 * image (/etc/ld.so.preload), this library answers those questions again as kpathsea
 * did under `openin_any = p` (see texmf-hardening.cnf): no absolute name but below
 * TEXMFOUTPUT, none that kpathsea would expand into one (`$SELFAUTOPARENT/etc/passwd`), no
 * parent folder, no dot file; with `r` (LuaTeX, makeindex) no dot file only. TeX Live 2022's kpathsea checks names before expanding them too.
 * sandbox-image/build.sh installs it in an image whose kpathsea lets any such name through,
 * and checks that the image refuses them all afterwards.
 *
 * Only symbols of the C library and, resolved at run time, of kpathsea itself: it is built on
 * the host and loaded by programs linked against a C library no older.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int boolean;
typedef void *kpathsea;

/* kpathsea's own lookup (environment, then texmf.cnf, per program first); weak, so that the
 * library loads into programs without kpathsea, which never call the functions below. */
extern char *kpathsea_var_value(kpathsea kpse, const char *var) __attribute__((weak));
extern char *kpse_var_value(const char *var) __attribute__((weak));
extern kpathsea kpse_def __attribute__((weak));

static char *value_of(kpathsea kpse, const char *var) {
  if (kpse && kpathsea_var_value) return kpathsea_var_value(kpse, var);
  if (kpse_var_value) return kpse_var_value(var);
  return NULL;
}

/* Whether `p`, in `name`, starts a component that is `..`. */
static boolean is_parent(const char *name, const char *p) {
  return (p == name || p[-1] == '/') && p[0] == '.' && p[1] == '.' && (p[2] == '/' || !p[2]);
}

/* kpathsea's rule for dot files: no component that starts with a dot, but `./` and `../` and
 * a last component named `.tex` (LaTeX's). */
static boolean has_dot_file(const char *name) {
  for (const char *p = name; *p; p++) {
    boolean starts = p == name || p[-1] == '/';
    boolean folder = p[1] == '/' || (p[1] == '.' && p[2] == '/');
    if (starts && p[0] == '.' && !folder && strcmp(p, ".tex") != 0) return 1;
  }
  return 0;
}

static boolean has_parent(const char *name) {
  for (const char *p = name; *p; p++)
    if (is_parent(name, p)) return 1;
  return 0;
}

/* kpathsea expands `$VAR` anywhere and `~` at the start after this check, and
 * `$SELFAUTOPARENT` is `/`: such a name is absolute for all the check can tell. */
static boolean is_expanded(const char *name) { return name[0] == '~' || strchr(name, '$'); }

/* Below TEXMFOUTPUT, the one absolute place `p` lets TeX read by name. */
static boolean below_output(kpathsea kpse, const char *name) {
  char *output = value_of(kpse, "TEXMFOUTPUT");
  boolean below = 0;
  if (output && *output) {
    size_t length = strlen(output);
    below = strncmp(name, output, length) == 0 && name[length] == '/';
  }
  free(output);
  return below;
}

static boolean name_ok(kpathsea kpse, const char *name, boolean silent) {
  if (!name) return 0;
  char *setting = value_of(kpse, "openin_any");
  /* Unset means the strictest, not kpathsea's "any". */
  char choice = setting && *setting ? setting[0] : 'p';
  free(setting);
  if (choice == 'a' || choice == 'y' || choice == '1') return 1;
  boolean ok = !has_dot_file(name);
  if (ok && !(choice == 'r' || choice == 'n' || choice == '0'))
    ok = !is_expanded(name) && !has_parent(name) && (name[0] != '/' || below_output(kpse, name));
  if (!ok && !silent) fprintf(stderr, "\nNot reading from %s (openin_any = %c).\n", name, choice);
  return ok;
}

/* Every read check libkpathsea 6.4 exports, each of which TeX Live 2026 made `return 1`. The
 * `_extended` ones would also allow TEXMF_OUTPUT_DIRECTORY, which no compile sets. The `kpse_`
 * ones take kpathsea's default instance. */
boolean kpathsea_in_name_ok(kpathsea kpse, const char *name) { return name_ok(kpse, name, 0); }
boolean kpathsea_in_name_ok_extended(kpathsea kpse, const char *name) {
  return name_ok(kpse, name, 0);
}
boolean kpathsea_in_name_ok_silent(kpathsea kpse, const char *name) {
  return name_ok(kpse, name, 1);
}
boolean kpathsea_in_name_ok_silent_extended(kpathsea kpse, const char *name) {
  return name_ok(kpse, name, 1);
}

static kpathsea default_instance(void) { return &kpse_def ? kpse_def : NULL; }

boolean kpse_in_name_ok(const char *name) { return name_ok(default_instance(), name, 0); }
boolean kpse_in_name_ok_extended(const char *name) {
  return name_ok(default_instance(), name, 0);
}
boolean kpse_in_name_ok_silent(const char *name) { return name_ok(default_instance(), name, 1); }
boolean kpse_in_name_ok_silent_extended(const char *name) {
  return name_ok(default_instance(), name, 1);
}
