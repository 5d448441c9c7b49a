// libFuzzer target: the broker's decoder (protocols/broker), which reads what the
// unprivileged session process sends to the privileged broker. Arbitrary bytes must give
// a message or an Error, never a crash; what decodes re-encodes to the same bytes, and
// the broker's state machine answers any decoded type without failing.
#include "protocols/broker/broker_message.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto m = broker::decode(std::span(data, size));
    if (!m.ok()) return 0;
    const auto again = broker::encode(*m);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
    broker::BrokerState state;
    (void)state.admit(broker::type_of(*m));
    return 0;
}
