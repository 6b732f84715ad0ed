// Status expectations shared by test_checkpoint.c and test_name_rules.c.
#ifndef TEST_CHECKPOINT_UTIL_H_
#define TEST_CHECKPOINT_UTIL_H_

#include <string.h>

#include "test_safetensors_util.h"

// Expects |status| to be a failure with |code| and exactly the message |want|; frees it.
static void ck__expect_exact(tprt_status_t status, tprt_status_code_t code, const char* want, const char* what) {
  if (!status) {
    TPRT__FAIL("%s succeeded; expected \"%s\"", what, want);
    return;
  }
  if (tprt_status_code(status) != code)
    TPRT__FAIL("%s: code %s, expected %s (%s)", what, tprt_status_code_string(tprt_status_code(status)),
               tprt_status_code_string(code), tprt_status_message(status));
  if (strcmp(tprt_status_message(status), want) != 0)
    TPRT__FAIL("%s: message\n  \"%s\"\nexpected\n  \"%s\"", what, tprt_status_message(status), want);
  tprt_status_free(status);
}

// Expects |status| to be a one-line failure with |code| whose message contains |text|; frees it.
static void ck__expect_fail(tprt_status_t status, tprt_status_code_t code, const char* text, const char* what) {
  if (!status) {
    TPRT__FAIL("%s succeeded; expected %s containing \"%s\"", what, tprt_status_code_string(code), text);
    return;
  }
  const char* msg = tprt_status_message(status);
  if (tprt_status_code(status) != code)
    TPRT__FAIL("%s: code %s, expected %s (%s)", what, tprt_status_code_string(tprt_status_code(status)),
               tprt_status_code_string(code), msg);
  if (!strstr(msg, text)) TPRT__FAIL("%s: message \"%s\" does not contain \"%s\"", what, msg, text);
  if (strchr(msg, '\n')) TPRT__FAIL("%s: message is more than one line: \"%s\"", what, msg);
  tprt_status_free(status);
}

static void ck__write_text(const tprt__tmpdir_t* dir, const char* name, const char* text) {
  char path[512];
  tprt__join(dir, name, path, sizeof path);
  tprt__write_bytes(path, text, strlen(text));
}

#endif  // TEST_CHECKPOINT_UTIL_H_
