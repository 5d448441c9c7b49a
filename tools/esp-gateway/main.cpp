// esp-gateway: the gateway side's userspace ESP endpoint for tests, demos and
// benchmarks (see esp_peer.h). Keys come from fake-gp-gateway's SA file.
#include "tools/esp-gateway/esp_peer.h"

int main(int argc, char** argv) { return espvpn::tools::run_esp_peer(espvpn::tools::PeerRole::gateway, argc, argv); }
