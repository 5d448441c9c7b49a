// libnm-vpn-plugin-espvpn.so: the NMVpnEditorPlugin libnm loads from the .name file's
// [libnm] plugin= (nm-connection-editor, GNOME Settings, nmcli's import/export). Its
// name, description and service; import and export (profile_import.h); and the editor,
// from the GTK3 or the GTK4 editor library beside this one, whichever GTK the process
// has loaded (GTK3 has gtk_container_add, GTK4 does not): the two GTKs cannot share a
// process, so each editor is a library of its own built from the same field table.
#include <NetworkManager.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "src/nm/editor/profile_import.h"

using espvpn::nm::editor::Profile;

namespace {

constexpr const char* kName = "espvpn";
constexpr const char* kDescription = "GlobalProtect and Cisco AnyConnect (ocserv) VPNs with espvpn";
constexpr const char* kEditorFactory = "nm_vpn_editor_factory_espvpn";

enum { PROP_0, PROP_NAME, PROP_DESC, PROP_SERVICE };

GQuark error_quark() { return g_quark_from_static_string("espvpn-editor-plugin-error"); }

}  // namespace

extern "C" {

typedef struct {
    GObject parent;
} EspvpnEditorPlugin;
typedef struct {
    GObjectClass parent;
} EspvpnEditorPluginClass;

static void espvpn_editor_plugin_iface_init(NMVpnEditorPluginInterface* iface);

G_DEFINE_TYPE_WITH_CODE(EspvpnEditorPlugin, espvpn_editor_plugin, G_TYPE_OBJECT,
                        G_IMPLEMENT_INTERFACE(NM_TYPE_VPN_EDITOR_PLUGIN, espvpn_editor_plugin_iface_init))

}  // extern "C"

namespace {

using EditorFactory = NMVpnEditor* (*)(NMVpnEditorPlugin*, NMConnection*, GError**);

// The editor library for the process's GTK, from this library's folder.
NMVpnEditor* get_editor(NMVpnEditorPlugin* plugin, NMConnection* connection, GError** error) {
    static EditorFactory factory = nullptr;
    if (!factory) {
        const bool gtk3 = dlsym(RTLD_DEFAULT, "gtk_container_add") != nullptr;
        const char* library = gtk3 ? "libnm-gtk3-vpn-plugin-espvpn-editor.so" : "libnm-gtk4-vpn-plugin-espvpn-editor.so";
        Dl_info self{};
        if (!dladdr(reinterpret_cast<void*>(&espvpn_editor_plugin_get_type), &self) || !self.dli_fname) {
            g_set_error(error, error_quark(), 1, "cannot find where the espvpn editor plugin was loaded from");
            return nullptr;
        }
        gchar* dir = g_path_get_dirname(self.dli_fname);
        gchar* path = g_build_filename(dir, library, nullptr);
        g_free(dir);
        // Kept loaded: its GTypes cannot be unregistered.
        void* handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        if (!handle) {
            g_set_error(error, error_quark(), 1, "cannot load the espvpn editor %s: %s", path, dlerror());
            g_free(path);
            return nullptr;
        }
        factory = reinterpret_cast<EditorFactory>(dlsym(handle, kEditorFactory));
        if (!factory) {
            g_set_error(error, error_quark(), 1, "%s has no %s", path, kEditorFactory);
            g_free(path);
            return nullptr;
        }
        g_free(path);
    }
    return factory(plugin, connection, error);
}

NMVpnEditorPluginCapability get_capabilities(NMVpnEditorPlugin*) {
    return static_cast<NMVpnEditorPluginCapability>(NM_VPN_EDITOR_PLUGIN_CAPABILITY_IMPORT |
                                                    NM_VPN_EDITOR_PLUGIN_CAPABILITY_EXPORT |
                                                    NM_VPN_EDITOR_PLUGIN_CAPABILITY_IPV6);
}

NMConnection* import_from_file(NMVpnEditorPlugin*, const char* path, GError** error) {
    gchar* text = nullptr;
    gsize length = 0;
    if (!g_file_get_contents(path, &text, &length, error)) return nullptr;
    if (length > 1024 * 1024) {
        g_free(text);
        g_set_error(error, error_quark(), 2, "%s is larger than 1 MiB: not a VPN profile", path);
        return nullptr;
    }
    Profile profile;
    std::string why;
    const bool ok = espvpn::nm::editor::import_profile(std::string_view(text, length), profile, why);
    explicit_bzero(text, length);  // it may hold secrets
    g_free(text);
    if (!ok) {
        g_set_error(error, error_quark(), 2, "%s: %s", path, why.c_str());
        return nullptr;
    }
    for (const auto& item : profile.left_out) g_message("espvpn import: left out '%s'", item.c_str());
    if (profile.name.empty()) {
        gchar* base = g_path_get_basename(path);
        if (char* dot = std::strrchr(base, '.'); dot && dot != base) *dot = '\0';
        profile.name = base;
        g_free(base);
    }
    NMConnection* connection = nm_simple_connection_new();
    NMSetting* s_con = nm_setting_connection_new();
    // A fresh UUID: the imported profile sits beside the one it came from.
    gchar* uuid = nm_utils_uuid_generate();
    g_object_set(s_con, NM_SETTING_CONNECTION_ID, profile.name.c_str(), NM_SETTING_CONNECTION_TYPE,
                 NM_SETTING_VPN_SETTING_NAME, NM_SETTING_CONNECTION_UUID, uuid, nullptr);
    g_free(uuid);
    nm_connection_add_setting(connection, s_con);
    NMSetting* s_vpn = nm_setting_vpn_new();
    g_object_set(s_vpn, NM_SETTING_VPN_SERVICE_TYPE, espvpn::nm::editor::kServiceType, nullptr);
    for (const auto& [k, v] : profile.items.data) nm_setting_vpn_add_data_item(NM_SETTING_VPN(s_vpn), k.c_str(), v.c_str());
    for (auto& [k, v] : profile.items.secrets) {
        nm_setting_vpn_add_secret(NM_SETTING_VPN(s_vpn), k.c_str(), v.c_str());
        explicit_bzero(v.data(), v.size());
    }
    nm_connection_add_setting(connection, s_vpn);
    return connection;
}

void collect_data(const char* key, const char* value, gpointer user_data) {
    (*static_cast<std::map<std::string, std::string>*>(user_data))[key] = value ? value : "";
}

gboolean export_to_file(NMVpnEditorPlugin*, const char* path, NMConnection* connection, GError** error) {
    NMSettingVpn* vpn = nm_connection_get_setting_vpn(connection);
    if (!vpn) {
        g_set_error(error, error_quark(), 3, "the connection has no VPN setting");
        return FALSE;
    }
    Profile profile;
    if (const char* id = nm_connection_get_id(connection)) profile.name = id;
    nm_setting_vpn_foreach_data_item(vpn, collect_data, &profile.items.data);
    const std::string text = espvpn::nm::editor::export_profile(profile);
    // A new file is created exclusively; an existing one (the file chooser asked
    // before overwriting) is replaced only if it is a regular file, never through a link.
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) != 0)) {
        close(fd);
        fd = -1;
        errno = EINVAL;
    }
    if (fd < 0) {
        g_set_error(error, error_quark(), 3, "cannot write %s: %s", path, std::strerror(errno));
        return FALSE;
    }
    std::string_view rest = text;
    while (!rest.empty()) {
        ssize_t n = write(fd, rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            g_set_error(error, error_quark(), 3, "cannot write %s: %s", path, std::strerror(errno));
            close(fd);
            return FALSE;
        }
        rest.remove_prefix(static_cast<std::size_t>(n));
    }
    if (close(fd) != 0) {
        g_set_error(error, error_quark(), 3, "cannot write %s: %s", path, std::strerror(errno));
        return FALSE;
    }
    return TRUE;
}

char* get_suggested_filename(NMVpnEditorPlugin*, NMConnection* connection) {
    const char* id = nm_connection_get_id(connection);
    gchar* safe = g_strdup(id && *id ? id : "espvpn");
    g_strdelimit(safe, "/\\", '-');
    gchar* name = g_strconcat(safe, ".nmconnection", nullptr);
    g_free(safe);
    return name;
}

void get_property(GObject* object, guint prop_id, GValue* value, GParamSpec* pspec) {
    switch (prop_id) {
        case PROP_NAME: g_value_set_string(value, kName); break;
        case PROP_DESC: g_value_set_string(value, kDescription); break;
        case PROP_SERVICE: g_value_set_string(value, espvpn::nm::editor::kServiceType); break;
        default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec); break;
    }
}

}  // namespace

extern "C" {

static void espvpn_editor_plugin_init(EspvpnEditorPlugin*) {}

static void espvpn_editor_plugin_class_init(EspvpnEditorPluginClass* klass) {
    GObjectClass* object_class = G_OBJECT_CLASS(klass);
    object_class->get_property = get_property;
    g_object_class_override_property(object_class, PROP_NAME, NM_VPN_EDITOR_PLUGIN_NAME);
    g_object_class_override_property(object_class, PROP_DESC, NM_VPN_EDITOR_PLUGIN_DESCRIPTION);
    g_object_class_override_property(object_class, PROP_SERVICE, NM_VPN_EDITOR_PLUGIN_SERVICE);
}

static void espvpn_editor_plugin_iface_init(NMVpnEditorPluginInterface* iface) {
    iface->get_editor = get_editor;
    iface->get_capabilities = get_capabilities;
    iface->import_from_file = import_from_file;
    iface->export_to_file = export_to_file;
    iface->get_suggested_filename = get_suggested_filename;
}

// libnm's entry point (nm_vpn_editor_plugin_load_from_file).
__attribute__((visibility("default"))) NMVpnEditorPlugin* nm_vpn_editor_plugin_factory(GError** error) {
    if (error) g_return_val_if_fail(*error == nullptr, nullptr);
    return static_cast<NMVpnEditorPlugin*>(g_object_new(espvpn_editor_plugin_get_type(), nullptr));
}

}  // extern "C"
