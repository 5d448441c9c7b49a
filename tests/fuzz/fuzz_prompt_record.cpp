// libFuzzer target: the prompt channel of espvpn --prompt-fd (protocols/prompt). Its record
// lines carry server text (labels, banners, messages) and are decoded by nm-espvpn-service
// (root) and the auth dialog; its answer lines are decoded by espvpn. A record that decodes
// is encoded again and must decode to the same fields, on one line with no raw control byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocols/prompt/prompt_channel.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view line(reinterpret_cast<const char*>(data), size);
    (void)prompt::decode_answer(Secret::from_string(line));
    auto record = prompt::decode(line);
    if (!record) return 0;
    const std::string again = prompt::encode(*record);
    if (again.empty() || again.back() != '\n') __builtin_trap();
    for (std::size_t i = 0; i + 1 < again.size(); ++i)
        if (static_cast<unsigned char>(again[i]) < 0x20 && again[i] != '\t') __builtin_trap();
    auto round = prompt::decode(std::string_view(again).substr(0, again.size() - 1));
    if (!round || round->type != record->type || round->form != record->form || round->name != record->name ||
        round->kind != record->kind || round->label != record->label || round->choices != record->choices ||
        round->text != record->text)
        __builtin_trap();
    return 0;
}
