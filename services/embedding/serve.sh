#!/bin/sh
# Entrypoint of echo-embedding: Infinity's own command line (`v2 --model-id ID ...`, as the operator
# passes it), with one twist: a model baked into the image under /models/ID is served from there,
# offline, under its id (clients and the operator keep saying "BAAI/bge-m3", not a path). A model
# that is not baked is downloaded by Infinity into $HF_HOME (the operator mounts the model cache
# volume there). With no arguments: `v2 --model-id $ECHO_EMBEDDING_MODEL` (the build-time MODEL_ID).
set -eu
if [ "$#" -eq 0 ]; then
  set -- v2 --model-id "${ECHO_EMBEDDING_MODEL:?set ECHO_EMBEDDING_MODEL or pass --model-id}"
fi
case " $* " in
  *" --served-model-name"*) named=1 ;;
  *) named=0 ;;
esac

baked=0
next_is_model=0
# Rebuild the argument list in place, rewriting the value of --model-id when it is baked.
for arg in "$@"; do
  shift
  if [ "$next_is_model" -eq 1 ]; then
    next_is_model=0
    if [ -f "/models/$arg/config.json" ]; then
      baked=1
      set -- "$@" "/models/$arg"
      [ "$named" -eq 1 ] || set -- "$@" --served-model-name "$arg"
      continue
    fi
  elif [ "$arg" = "--model-id" ]; then
    next_is_model=1
  fi
  set -- "$@" "$arg"
done

if [ "$baked" -eq 1 ]; then
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
else
  echo "echo-embedding: the model is not baked into this image; Infinity fetches it into ${HF_HOME:-its cache}" >&2
fi
exec infinity_emb "$@"
