// esp-gateway: the gateway side's userspace ESP endpoint for tests, demos and
// benchmarks (see esp_endpoint.h). Keys come from fake-gp-gateway's SA file.
#include "tools/esp-gateway/esp_endpoint.h"

int main(int argc, char** argv) { return espvpn::tools::run_esp_endpoint(espvpn::tools::EndpointRole::gateway, argc, argv); }
