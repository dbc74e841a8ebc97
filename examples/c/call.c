/* fgemma from C: one request to a function call (the JSON `fgemma call` prints), then a few
 * tokens of streamed text generation.
 *
 *   cc call.c $(pkg-config --cflags --libs fgemma) -o call      # after make install
 *   ./call MODEL.gguf examples/smart_home.json "turn the light on in the kitchen" [--generate]
 */
#include <fgemma/fgemma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char* ReadFile(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, n = 0;
  char* s = (char*)malloc(cap);
  size_t got;
  while (s != NULL && (got = fread(s + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) s = (char*)realloc(s, cap *= 2);
  }
  fclose(f);
  if (s != NULL) s[n] = '\0';
  return s;
}

static int Print(void* user, int32_t token, const char* text, size_t len) {
  (void)user;
  (void)token;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop the generation */
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL.gguf CATALOG.json REQUEST [--generate]\n", argv[0]);
    return 2;
  }
  if ((fg_api_version() >> 16) != FG_API_VERSION_MAJOR) {
    fprintf(stderr, "libfgemma %s has another ABI major version\n", fg_version());
    return 1;
  }
  char* catalog = ReadFile(argv[2]);
  if (catalog == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[2]);
    return 1;
  }
  fg_model* model = NULL;
  fg_caller* caller = NULL;
  char* json = NULL;
  int rc = 1;
  fg_caller_options opt;
  fg_caller_options_init(&opt); /* fgemma call's defaults: greedy, grammar-constrained */
  if (fg_model_load(argv[1], NULL, 0, &model) != FG_OK ||
      fg_caller_create(model, catalog, &opt, &caller) != FG_OK ||
      fg_caller_call(caller, argv[3], &json, NULL) != FG_OK) {
    fprintf(stderr, "fgemma: %s\n", fg_last_error());
    goto out;
  }
  printf("%s\n", json);
  if (argc > 4 && strcmp(argv[4], "--generate") == 0) {
    fg_session* session = NULL;
    fg_generate_options g;
    fg_generate_options_init(&g);
    g.temperature = 0;
    g.max_tokens = 16;
    if (fg_session_create(model, 0, 0, &session) != FG_OK ||
        fg_session_generate(session, argv[3], &g, Print, NULL, NULL) != FG_OK) {
      fprintf(stderr, "fgemma: %s\n", fg_last_error());
      fg_session_free(session);
      goto out;
    }
    printf("\n");
    fg_session_free(session);
  }
  rc = 0;
out:
  fg_free(json);
  fg_caller_free(caller);
  fg_model_free(model);
  free(catalog);
  return rc;
}
