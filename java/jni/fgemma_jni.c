/* JNI glue: org.fgemma.Native's functions over the C ABI (include/fgemma/fgemma.h). Strings come
 * as NUL-terminated UTF-8 byte arrays (org.fgemma.Fgemma.cString); every error status becomes
 * an org.fgemma.FgemmaException with the library's message. Handles are jlongs; 0 is the C
 * NULL, which the library reports as an error. */
#include <fgemma/fgemma.h>
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void Throw(JNIEnv* env, int status, const char* message) {
  if ((*env)->ExceptionCheck(env)) return; /* keep the first exception */
  jclass cls = (*env)->FindClass(env, "org/fgemma/FgemmaException");
  if (cls == NULL) return;
  jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V");
  if (ctor == NULL) return;
  /* NewStringUTF wants modified UTF-8; fgemma's messages may quote user bytes, so build the
   * String from the bytes through the JVM's own UTF-8 decoder. */
  jstring msg = NULL;
  size_t n = strlen(message);
  jbyteArray bytes = (*env)->NewByteArray(env, (jsize)n);
  if (bytes != NULL) {
    (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)n, (const jbyte*)message);
    jclass fg = (*env)->FindClass(env, "org/fgemma/Fgemma");
    jmethodID utf8 =
        fg ? (*env)->GetStaticMethodID(env, fg, "utf8", "([B)Ljava/lang/String;") : NULL;
    if (utf8 != NULL) msg = (jstring)(*env)->CallStaticObjectMethod(env, fg, utf8, bytes);
  }
  if ((*env)->ExceptionCheck(env)) return;
  jobject ex = (*env)->NewObject(env, cls, ctor, (jint)status, msg);
  if (ex != NULL) (*env)->Throw(env, (jthrowable)ex);
}

/* Throws for a failed status; returns 1 when it did. */
static int Check(JNIEnv* env, fg_status s) {
  if (s == FG_OK) return 0;
  Throw(env, (int)s, fg_last_error());
  return 1;
}

/* A malloc'd copy of a byte array the Java side NUL-terminated (NULL for a null array). */
static char* CopyBytes(JNIEnv* env, jbyteArray a) {
  if (a == NULL) return NULL;
  jsize n = (*env)->GetArrayLength(env, a);
  char* s = (char*)malloc((size_t)n + 1);
  if (s == NULL) {
    Throw(env, FG_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  (*env)->GetByteArrayRegion(env, a, 0, n, (jbyte*)s);
  s[n] = '\0';
  return s;
}

static jbyteArray ToBytes(JNIEnv* env, const char* s) {
  size_t n = strlen(s);
  jbyteArray a = (*env)->NewByteArray(env, (jsize)n);
  if (a != NULL) (*env)->SetByteArrayRegion(env, a, 0, (jsize)n, (const jbyte*)s);
  return a;
}

#define H(T, h) ((T*)(intptr_t)(h))

JNIEXPORT jint JNICALL Java_org_fgemma_Fgemma_nativeApiVersion(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return (jint)fg_api_version();
}

JNIEXPORT jstring JNICALL Java_org_fgemma_Fgemma_nativeVersion(JNIEnv* env, jclass cls) {
  (void)cls;
  return (*env)->NewStringUTF(env, fg_version()); /* ASCII */
}

static void FreeLoras(fg_lora* loras, jsize n) {
  for (jsize i = 0; loras != NULL && i < n; ++i) free((void*)loras[i].path);
  free(loras);
}

/* An fg_lora array from paths (byte arrays) and scales, for FreeLoras; *n its length. NULL with
 * an exception pending on failure (an empty array is a valid one-element allocation). */
static fg_lora* Loras(JNIEnv* env, jobjectArray paths, jfloatArray scales, const char* what,
                      jsize* n) {
  *n = paths ? (*env)->GetArrayLength(env, paths) : 0;
  if (scales == NULL || (*env)->GetArrayLength(env, scales) != *n) {
    char msg[96];
    snprintf(msg, sizeof(msg), "%s paths and scales differ in number", what);
    Throw(env, FG_INVALID_ARGUMENT, msg);
    return NULL;
  }
  fg_lora* loras = (fg_lora*)calloc((size_t)*n + 1, sizeof(fg_lora));
  jfloat* s = (*env)->GetFloatArrayElements(env, scales, NULL);
  int ok = loras != NULL && s != NULL;
  for (jsize i = 0; ok && i < *n; ++i) {
    jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, paths, i);
    loras[i].path = CopyBytes(env, b);
    loras[i].scale = s[i];
    ok = loras[i].path != NULL;
    if (b != NULL) (*env)->DeleteLocalRef(env, b);
  }
  const int oom = loras == NULL || s == NULL;
  if (s != NULL) (*env)->ReleaseFloatArrayElements(env, scales, s, JNI_ABORT);
  if (!ok) {
    FreeLoras(loras, *n);
    if (!(*env)->ExceptionCheck(env)) {
      Throw(env, oom ? FG_RESOURCE_EXHAUSTED : FG_INVALID_ARGUMENT,
            oom ? "out of memory" : "null path");
    }
    return NULL;
  }
  return loras;
}

JNIEXPORT jlong JNICALL Java_org_fgemma_Native_modelLoad(JNIEnv* env, jclass cls, jbyteArray path,
                                                         jobjectArray lora_paths,
                                                         jfloatArray lora_scales) {
  (void)cls;
  jsize n = 0;
  fg_lora* loras = Loras(env, lora_paths, lora_scales, "adapter", &n);
  if (loras == NULL) return 0;
  char* p = CopyBytes(env, path);
  fg_model* m = NULL;
  if (p != NULL) {
    Check(env, fg_model_load(p, loras, (size_t)n, &m));
  } else if (!(*env)->ExceptionCheck(env)) {
    Throw(env, FG_INVALID_ARGUMENT, "null path");
  }
  FreeLoras(loras, n);
  free(p);
  return (jlong)(intptr_t)m;
}

JNIEXPORT jlong JNICALL Java_org_fgemma_Native_modelLoadEx(JNIEnv* env, jclass cls, jbyteArray path,
                                                           jobjectArray lora_paths,
                                                           jfloatArray lora_scales,
                                                           jobjectArray prior_paths,
                                                           jfloatArray prior_scales) {
  (void)cls;
  jsize n = 0, n_prior = 0;
  fg_lora* loras = Loras(env, lora_paths, lora_scales, "adapter", &n);
  if (loras == NULL) return 0;
  fg_lora* priors = Loras(env, prior_paths, prior_scales, "prior adapter", &n_prior);
  if (priors == NULL) {
    FreeLoras(loras, n);
    return 0;
  }
  char* p = CopyBytes(env, path);
  fg_model* m = NULL;
  if (p != NULL) {
    fg_model_options o;
    fg_model_options_init(&o);
    o.loras = loras;
    o.n_loras = (size_t)n;
    o.prior_loras = priors;
    o.n_prior_loras = (size_t)n_prior;
    Check(env, fg_model_load_ex(p, &o, &m));
  } else if (!(*env)->ExceptionCheck(env)) {
    Throw(env, FG_INVALID_ARGUMENT, "null path");
  }
  FreeLoras(priors, n_prior);
  FreeLoras(loras, n);
  free(p);
  return (jlong)(intptr_t)m;
}

JNIEXPORT void JNICALL Java_org_fgemma_Native_modelFree(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  fg_model_free(H(fg_model, h));
}

JNIEXPORT jlong JNICALL Java_org_fgemma_Native_modelTrainedContext(JNIEnv* env, jclass cls,
                                                                   jlong h) {
  (void)cls;
  int64_t v = 0;
  Check(env, fg_model_trained_context(H(fg_model, h), &v));
  return (jlong)v;
}

JNIEXPORT jint JNICALL Java_org_fgemma_Native_modelVocabSize(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  int32_t v = 0;
  Check(env, fg_model_vocab_size(H(fg_model, h), &v));
  return (jint)v;
}

JNIEXPORT jintArray JNICALL Java_org_fgemma_Native_tokenize(JNIEnv* env, jclass cls, jlong h,
                                                            jbyteArray text, jboolean add_bos,
                                                            jboolean parse_special) {
  (void)cls;
  char* t = CopyBytes(env, text);
  if (t == NULL && text != NULL) return NULL;
  size_t n = 0, cap = (t ? strlen(t) : 0) + 2;
  int32_t* ids = NULL;
  jintArray out = NULL;
  for (;;) {
    free(ids);
    ids = (int32_t*)malloc(cap * sizeof(int32_t));
    if (ids == NULL) {
      Throw(env, FG_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    fg_status s = fg_tokenize(H(fg_model, h), t, add_bos, parse_special, ids, cap, &n);
    if (s == FG_OUT_OF_RANGE && n > cap) {
      cap = n;
      continue;
    }
    if (Check(env, s)) break;
    out = (*env)->NewIntArray(env, (jsize)n);
    if (out != NULL) (*env)->SetIntArrayRegion(env, out, 0, (jsize)n, (const jint*)ids);
    break;
  }
  free(ids);
  free(t);
  return out;
}

JNIEXPORT jbyteArray JNICALL Java_org_fgemma_Native_detokenize(JNIEnv* env, jclass cls, jlong h,
                                                               jintArray ids, jboolean special) {
  (void)cls;
  if (ids == NULL) {
    Throw(env, FG_INVALID_ARGUMENT, "null ids");
    return NULL;
  }
  jsize n = (*env)->GetArrayLength(env, ids);
  jint* v = (*env)->GetIntArrayElements(env, ids, NULL);
  if (v == NULL) return NULL;
  char* text = NULL;
  jbyteArray out = NULL;
  if (!Check(env, fg_detokenize(H(fg_model, h), (const int32_t*)v, (size_t)n, special, &text))) {
    out = ToBytes(env, text);
  }
  fg_free(text);
  (*env)->ReleaseIntArrayElements(env, ids, v, JNI_ABORT);
  return out;
}

JNIEXPORT jlong JNICALL Java_org_fgemma_Native_callerCreate(
    JNIEnv* env, jclass cls, jlong model, jbyteArray catalog, jbyteArray dialect,
    jbyteArray constrain, jdouble temperature, jlong top_k, jdouble top_p, jlong seed,
    jint max_calls, jlong max_tokens, jlong context, jint threads, jbyteArray cache_dir,
    jbyteArray tool_map, jint draft_tokens, jboolean reuse, jdouble tool_channel,
    jboolean argument_check, jdouble copy_bias, jboolean fill_arguments, jdouble blend,
    jint fix_typos) {
  (void)cls;
  fg_caller_options o;
  fg_caller_options_init(&o);
  char* cat = CopyBytes(env, catalog);
  char* d = CopyBytes(env, dialect);
  char* c = CopyBytes(env, constrain);
  char* cd = CopyBytes(env, cache_dir);
  char* tm = CopyBytes(env, tool_map);
  fg_caller* caller = NULL;
  if (!(*env)->ExceptionCheck(env)) {
    if (d) o.dialect = d;
    if (c) o.constrain = c;
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = (uint64_t)seed;
    o.max_calls = max_calls;
    o.max_tokens = max_tokens;
    o.context = context;
    o.threads = threads;
    o.cache_dir = cd;
    o.tool_map_json = tm;
    o.draft_tokens = draft_tokens;
    o.reuse_request_prefix = reuse ? 1 : 0;
    o.tool_channel = tool_channel;
    o.argument_check = argument_check ? 1 : 0;
    o.copy_bias = copy_bias;
    o.fill_arguments = fill_arguments ? 1 : 0;
    if (blend != -1) o.blend = blend; /* -1: the library's default */
    o.fix_typos = fix_typos;
    Check(env, fg_caller_create(H(fg_model, model), cat, &o, &caller));
  }
  free(cat);
  free(d);
  free(c);
  free(cd);
  free(tm);
  return (jlong)(intptr_t)caller;
}

JNIEXPORT void JNICALL Java_org_fgemma_Native_callerFree(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  fg_caller_free(H(fg_caller, h));
}

JNIEXPORT jbyteArray JNICALL Java_org_fgemma_Native_callerCall(JNIEnv* env, jclass cls, jlong h,
                                                               jbyteArray request) {
  (void)cls;
  char* r = CopyBytes(env, request);
  if (r == NULL && request != NULL) return NULL;
  char* json = NULL;
  jbyteArray out = NULL;
  if (!Check(env, fg_caller_call(H(fg_caller, h), r, &json, NULL))) out = ToBytes(env, json);
  fg_free(json);
  free(r);
  return out;
}

JNIEXPORT jlong JNICALL Java_org_fgemma_Native_sessionCreate(JNIEnv* env, jclass cls,
                                                             jlong model, jlong context,
                                                             jint threads) {
  (void)cls;
  fg_session* s = NULL;
  Check(env, fg_session_create(H(fg_model, model), context, threads, &s));
  return (jlong)(intptr_t)s;
}

JNIEXPORT void JNICALL Java_org_fgemma_Native_sessionFree(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  fg_session_free(H(fg_session, h));
}

struct Sink {
  JNIEnv* env;
  jobject sink;
  jmethodID on_bytes;
};

static int OnToken(void* user, int32_t token, const char* text, size_t len) {
  struct Sink* s = (struct Sink*)user;
  JNIEnv* env = s->env;
  jbyteArray b = (*env)->NewByteArray(env, (jsize)len);
  if (b == NULL) return 1; /* OutOfMemoryError pending: stop */
  (*env)->SetByteArrayRegion(env, b, 0, (jsize)len, (const jbyte*)text);
  jboolean go = (*env)->CallBooleanMethod(env, s->sink, s->on_bytes, (jint)token, b);
  (*env)->DeleteLocalRef(env, b);
  if ((*env)->ExceptionCheck(env)) return 1; /* the listener threw: stop, rethrown on return */
  return go ? 0 : 1;
}

JNIEXPORT jlong JNICALL Java_org_fgemma_Native_sessionGenerate(
    JNIEnv* env, jclass cls, jlong h, jbyteArray prompt, jlong max_tokens, jdouble temperature,
    jlong top_k, jdouble top_p, jlong seed, jboolean raw, jboolean no_special, jobject sink) {
  (void)cls;
  if (sink == NULL) {
    Throw(env, FG_INVALID_ARGUMENT, "null sink");
    return 0;
  }
  jclass sc = (*env)->GetObjectClass(env, sink);
  jmethodID m = (*env)->GetMethodID(env, sc, "onBytes", "(I[B)Z");
  if (m == NULL) return 0;
  char* p = CopyBytes(env, prompt);
  if (p == NULL && prompt != NULL) return 0;
  fg_generate_options o;
  fg_generate_options_init(&o);
  o.max_tokens = max_tokens;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = (uint64_t)seed;
  o.raw = raw ? 1 : 0;
  o.no_special = no_special ? 1 : 0;
  struct Sink s = {env, sink, m};
  fg_generate_result r;
  memset(&r, 0, sizeof(r));
  fg_status st = fg_session_generate(H(fg_session, h), p, &o, OnToken, &s, &r);
  free(p);
  if ((*env)->ExceptionCheck(env)) return 0; /* the listener's exception */
  Check(env, st);
  return (jlong)r.generated_tokens;
}
