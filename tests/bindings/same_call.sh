#!/usr/bin/env bash
# The same requests through the CLI (fgemma call), C (examples/c), C++ (examples/cpp), Python
# (examples/python) and Java (examples/java): every binding must print the CLI's bytes.
# Usage: same_call.sh SOURCE_DIR, with FGEMMA_CLI, FGEMMA_C_EXAMPLE, FGEMMA_CPP_EXAMPLE,
# FGEMMA_LIBRARY, FGEMMA_JNI + FGEMMA_JAR (empty: no JVM binding built), FGEMMA_SYNTHETIC_MODEL;
# on the real model when FGEMMA_MODEL names a file. The library applies the adapters its caller
# names and no others; the CLI adds its shipped call adapter when -m names the default model
# (README), so the CLI runs with --no-lora here.
set -uo pipefail
src=$1
if [ -n "${FGEMMA_MODEL:-}" ] && [ -f "${FGEMMA_MODEL}" ]; then
  model=$FGEMMA_MODEL
  catalog=$src/examples/smart_home.json
  echo "model: $model (real), catalog: $catalog"
else
  model=$FGEMMA_SYNTHETIC_MODEL
  catalog=$src/tests/bindings/catalog.json
  echo "model: $model (synthetic; set FGEMMA_MODEL for the real one), catalog: $catalog"
fi
requests=("turn the light on in the kitchen" "set the thermostat to heat, eco mode"
          "café ☕: stop the music")
java_bin=$(command -v java || true)
passed=0
failed=0
for req in "${requests[@]}"; do
  want=$("$FGEMMA_CLI" call -m "$model" --no-lora --tools "$catalog" "$req")
  if [ -z "$want" ]; then
    echo "FAILED: the CLI printed nothing for '$req'"; failed=$((failed + 1)); continue
  fi
  echo "request: $req"
  echo "  cli    $want"
  declare -A got=()
  got[c]=$("$FGEMMA_C_EXAMPLE" "$model" "$catalog" "$req" 2>&1)
  got[cpp]=$("$FGEMMA_CPP_EXAMPLE" "$model" "$catalog" "$req" 2>&1)
  got[python]=$(PYTHONPATH="$src/python" python3 "$src/examples/python/call.py" "$model" \
                  "$catalog" "$req" 2>&1)
  if [ -n "${FGEMMA_JNI:-}" ] && [ -n "${FGEMMA_JAR:-}" ] && [ -n "$java_bin" ]; then
    got[java]=$("$java_bin" -Dfgemma.jni.library="$FGEMMA_JNI" -cp "$FGEMMA_JAR" \
                  "$src/examples/java/Call.java" "$model" "$catalog" "$req" 2>&1)
  else
    echo "  java   SKIPPED: no JVM binding built (jni.h/javac missing)"
  fi
  for lang in c cpp python java; do
    [ -n "${got[$lang]+x}" ] || continue
    if [ "${got[$lang]}" == "$want" ]; then
      echo "  $(printf '%-6s' "$lang") same bytes"; passed=$((passed + 1))
    else
      echo "FAILED: $lang printed: ${got[$lang]}"; failed=$((failed + 1))
    fi
  done
  unset got
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
