// One end of a userspace ESP tunnel driven by an SA file instead of a login:
// a tun device + a UDP socket + the project's EspDatapath, with keys read from
// the fake GP gateway's SA file (env form) and re-read whenever it changes.
//
//  - gateway role (tools/esp-gateway): the GP gateway's ESP endpoint. Unconnected
//    socket on port 4501, learns the client's address from authentic packets,
//    opens c2s and seals s2c, switches to a new s2c SA once the client uses the
//    new c2s SA. Its tun carries the gw-address, so the gateway's kernel answers
//    the client's GP probe (an ICMP echo) and the reply goes back through ESP.
//  - client role (tests/integration/datapath/esp-test-client, a TEST/BENCH entry
//    until the GP session drives the datapath): connected socket, opens s2c,
//    seals c2s (switching at once on rekey), sends GP probes until answered.
#pragma once

namespace espvpn::tools {

enum class EndpointRole { gateway, client };

// Parses argv (see usage() in esp_endpoint.cpp), runs until SIGINT/SIGTERM or
// --seconds, returns the process exit code.
int run_esp_endpoint(EndpointRole role, int argc, char** argv);

}  // namespace espvpn::tools
