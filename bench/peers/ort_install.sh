# Sourced by the peer scripts: installs onnxruntime-node (npm, --ignore-scripts: the package
# carries libonnxruntime.so) into a cache folder on first use and exports NODE_PATH to it.
# The folder is $DPRUN_PEER_CACHE, by default ~/.cache/dprun-peers.
dprun_peer_cache=${DPRUN_PEER_CACHE:-$HOME/.cache/dprun-peers}
if [ ! -d "$dprun_peer_cache/node_modules/onnxruntime-node" ]; then
  mkdir -p "$dprun_peer_cache"
  (cd "$dprun_peer_cache" && npm install --ignore-scripts --silent onnxruntime-node >/dev/null)
fi
export NODE_PATH="$dprun_peer_cache/node_modules"
