// esp-test-client: TEST/BENCH ENTRY ONLY. The client end of an ESP tunnel
// driven by an SA file (written by gp_getconfig.py from a real getconfig reply)
// instead of a GP login, until the GP session drives the datapath itself.
// Same code path as the session will use: TunDevice + UdpSocket + Datapath.
#include "tools/esp-gateway/esp_peer.h"

int main(int argc, char** argv) { return espvpn::tools::run_esp_peer(espvpn::tools::PeerRole::client, argc, argv); }
