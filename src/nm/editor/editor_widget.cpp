// The NMVpnEditor of an espvpn profile: a form built from the field table
// (profile_fields.h), one row per field. Compiled twice, against GTK3
// (libnm-gtk3-vpn-plugin-espvpn-editor.so, nm-connection-editor) and GTK4
// (libnm-gtk4-vpn-plugin-espvpn-editor.so, GNOME Settings); the few calls the two GTKs
// spell differently are the ESPVPN_GTK* helpers below. A field with a bad value is
// marked (style class "error", its reason as tooltip and accessible description) and
// update_connection() fails with the reasons, which nm-connection-editor shows on its
// Save button.
#include <NetworkManager.h>
#include <gtk/gtk.h>

#include <map>
#include <string>
#include <vector>

#include "src/nm/editor/profile_fields.h"

namespace ed = espvpn::nm::editor;

namespace {

#if GTK_MAJOR_VERSION >= 4
std::string entry_text(GtkWidget* e) { return gtk_editable_get_text(GTK_EDITABLE(e)); }
void set_entry_text(GtkWidget* e, const std::string& t) { gtk_editable_set_text(GTK_EDITABLE(e), t.c_str()); }
bool check_active(GtkWidget* b) { return gtk_check_button_get_active(GTK_CHECK_BUTTON(b)); }
void set_check_active(GtkWidget* b, bool on) { gtk_check_button_set_active(GTK_CHECK_BUTTON(b), on); }
void set_error_class(GtkWidget* w, bool on) {
    if (on) gtk_widget_add_css_class(w, "error");
    else gtk_widget_remove_css_class(w, "error");
}
// A widget with a label beside it is named by it (the mnemonic widget's labelled-by
// relation); a LABEL property too would make GTK4 say the name twice.
void set_accessible(GtkWidget* w, const char* name, const std::string& description) {
    GList* labels = gtk_widget_list_mnemonic_labels(w);
    if (!labels) gtk_accessible_update_property(GTK_ACCESSIBLE(w), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
    g_list_free(labels);
    gtk_accessible_update_property(GTK_ACCESSIBLE(w), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, description.c_str(), -1);
}
#else
std::string entry_text(GtkWidget* e) { return gtk_entry_get_text(GTK_ENTRY(e)); }
void set_entry_text(GtkWidget* e, const std::string& t) { gtk_entry_set_text(GTK_ENTRY(e), t.c_str()); }
bool check_active(GtkWidget* b) { return gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(b)); }
void set_check_active(GtkWidget* b, bool on) { gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(b), on); }
void set_error_class(GtkWidget* w, bool on) {
    GtkStyleContext* style = gtk_widget_get_style_context(w);
    if (on) gtk_style_context_add_class(style, "error");
    else gtk_style_context_remove_class(style, "error");
}
void set_accessible(GtkWidget* w, const char* name, const std::string& description) {
    AtkObject* a = gtk_widget_get_accessible(w);
    atk_object_set_name(a, name);
    atk_object_set_description(a, description.c_str());
}
#endif

struct Row {
    const ed::Field* field;
    GtkWidget* input;    // entry, combo box or check button
    GtkWidget* storage;  // Kind::secret: where it is kept (combo box); else null
};

struct Impl {
    GtkWidget* grid = nullptr;
    GtkWidget* message = nullptr;  // the reasons, under the form
    GtkWidget* forget = nullptr;   // "Forget saved sign-in" (GlobalProtect's portal cookie)
    std::vector<Row> rows;
    bool loading = false;
};

ed::FormValues read_form(const Impl& impl) {
    ed::FormValues form;
    for (const Row& row : impl.rows) {
        const std::string key = row.field->key;
        switch (row.field->kind) {
            case ed::Kind::choice: {
                const char* id = gtk_combo_box_get_active_id(GTK_COMBO_BOX(row.input));
                form.values[key] = id ? id : "";
                break;
            }
            case ed::Kind::boolean: form.values[key] = check_active(row.input) ? "yes" : ""; break;
            case ed::Kind::secret: {
                form.values[key] = entry_text(row.input);
                const char* id = gtk_combo_box_get_active_id(GTK_COMBO_BOX(row.storage));
                form.secret_flags[key] = id ? static_cast<unsigned>(std::stoul(id)) : 0u;
                break;
            }
            default: {
                // Blanks around a typed or pasted value are not part of it.
                gchar* t = g_strstrip(g_strdup(entry_text(row.input).c_str()));
                form.values[key] = t;
                g_free(t);
            }
        }
    }
    return form;
}

// Marks the bad fields; returns the reasons, one per line ("" = all good).
std::string show_validity(Impl& impl, const ed::FormValues& form) {
    std::map<std::string, std::string> bad;
    std::string all;
    for (const auto& inv : ed::validate_form(form)) {
        bad[inv.key] += (bad[inv.key].empty() ? "" : "; ") + inv.reason;
        all += (all.empty() ? "" : "\n") + inv.reason;
    }
    for (const Row& row : impl.rows) {
        auto it = bad.find(row.field->key);
        const bool invalid = it != bad.end();
        set_error_class(row.input, invalid);
        const std::string description = invalid ? "invalid: " + it->second : row.field->hint;
        gtk_widget_set_tooltip_text(row.input, description.empty() ? nullptr : description.c_str());
        set_accessible(row.input, row.field->label, description);
    }
    gtk_label_set_text(GTK_LABEL(impl.message), all.c_str());
    return all;
}

GtkWidget* combo(std::span<const ed::Choice> choices, const std::string& active) {
    GtkWidget* box = gtk_combo_box_text_new();
    bool found = false;
    for (const ed::Choice& c : choices) {
        gtk_combo_box_text_append(GTK_COMBO_BOX_TEXT(box), c.value, c.label);
        found = found || active == c.value;
    }
    // A value the table does not offer (an imported or hand-made profile) is shown as
    // itself, and validation says it is not a choice.
    if (!found) gtk_combo_box_text_append(GTK_COMBO_BOX_TEXT(box), active.c_str(), active.c_str());
    gtk_combo_box_set_active_id(GTK_COMBO_BOX(box), active.c_str());
    return box;
}

}  // namespace

extern "C" {

typedef struct {
    GObject parent;
    Impl* impl;
} EspvpnEditor;
typedef struct {
    GObjectClass parent;
} EspvpnEditorClass;

static void espvpn_editor_iface_init(NMVpnEditorInterface* iface);

G_DEFINE_TYPE_WITH_CODE(EspvpnEditor, espvpn_editor, G_TYPE_OBJECT,
                        G_IMPLEMENT_INTERFACE(NM_TYPE_VPN_EDITOR, espvpn_editor_iface_init))

}  // extern "C"

namespace {

EspvpnEditor* self_of(gpointer p) {
    return G_TYPE_CHECK_INSTANCE_CAST(p, espvpn_editor_get_type(), EspvpnEditor);
}

void on_changed(GtkWidget*, gpointer editor) {
    Impl& impl = *self_of(editor)->impl;
    if (impl.loading) return;
    show_validity(impl, read_form(impl));
    g_signal_emit_by_name(editor, "changed");
}

GObject* get_widget(NMVpnEditor* editor) { return G_OBJECT(self_of(editor)->impl->grid); }

void collect_data(const char* key, const char* value, gpointer user_data) {
    (*static_cast<std::map<std::string, std::string>*>(user_data))[key] = value ? value : "";
}

gboolean update_connection(NMVpnEditor* editor, NMConnection* connection, GError** error) {
    Impl& impl = *self_of(editor)->impl;
    const ed::FormValues form = read_form(impl);
    const std::string reasons = show_validity(impl, form);
    if (!reasons.empty()) {
        // NM_CONNECTION_ERROR's domain (libnm's nm-errors.h declares its quark function
        // without C linkage, so C++ cannot link it by name).
        g_set_error_literal(error, g_quark_from_static_string("nm-connection-error-quark"),
                            NM_CONNECTION_ERROR_INVALID_PROPERTY, reasons.c_str());
        return FALSE;
    }
    NMSettingVpn* vpn = nm_connection_get_setting_vpn(connection);
    if (!vpn) {
        vpn = NM_SETTING_VPN(nm_setting_vpn_new());
        nm_connection_add_setting(connection, NM_SETTING(vpn));
    }
    g_object_set(vpn, NM_SETTING_VPN_SERVICE_TYPE, "org.freedesktop.NetworkManager.espvpn", nullptr);
    ed::VpnItems items;
    nm_setting_vpn_foreach_data_item(vpn, collect_data, &items.data);
    nm_setting_vpn_foreach_secret(vpn, collect_data, &items.secrets);
    const auto old_data = items.data;
    const auto old_secrets = items.secrets;
    ed::form_to_items(form, items);
    for (const auto& [k, v] : old_data)
        if (!items.data.count(k)) nm_setting_vpn_remove_data_item(vpn, k.c_str());
    for (const auto& [k, v] : old_secrets)
        if (!items.secrets.count(k)) nm_setting_vpn_remove_secret(vpn, k.c_str());
    for (const auto& [k, v] : items.data) nm_setting_vpn_add_data_item(vpn, k.c_str(), v.c_str());
    for (const auto& [k, v] : items.secrets) nm_setting_vpn_add_secret(vpn, k.c_str(), v.c_str());
    return TRUE;
}

// "Forget saved sign-in": espvpn --forget-cookies=PORTAL, run here, as the desktop user
// whose login window saved the portal cookie; its answer shown under the form. Quick
// (one file removed), so run to its end.
void on_forget(GtkWidget*, gpointer data) {
    Impl& impl = *self_of(data)->impl;
    // ESPVPN_NM_ESPVPN: another espvpn than the installed one (a build tree's, for its tests).
    const char* other = g_getenv("ESPVPN_NM_ESPVPN");
    const auto command = ed::forget_cookies_command(other && *other ? other : ESPVPN_NM_DEFAULT_BINARY, read_form(impl));
    if (command.empty()) {
        gtk_label_set_text(GTK_LABEL(impl.message), "Forget saved sign-in: only a GlobalProtect profile with a "
                                                    "valid gateway has one");
        return;
    }
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    gchar* err = nullptr;
    gint status = 0;
    GError* error = nullptr;
    std::string text;
    if (!g_spawn_sync(nullptr, argv.data(), nullptr, G_SPAWN_STDOUT_TO_DEV_NULL, nullptr, nullptr, nullptr, &err,
                      &status, &error)) {
        text = std::string("Forget saved sign-in: ") + error->message;
        g_error_free(error);
    } else {
        std::string out = err ? err : "";
        while (!out.empty() && out.back() == '\n') out.pop_back();
        const std::string last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
        text = (g_spawn_check_wait_status(status, nullptr) ? "Saved sign-in forgotten: " : "Forget saved sign-in failed: ") +
               last;
    }
    g_free(err);
    gtk_label_set_text(GTK_LABEL(impl.message), text.c_str());
}

void build_form(EspvpnEditor* self, NMConnection* connection) {
    Impl& impl = *self->impl;
    ed::VpnItems items;
    if (NMSettingVpn* vpn = connection ? nm_connection_get_setting_vpn(connection) : nullptr) {
        nm_setting_vpn_foreach_data_item(vpn, collect_data, &items.data);
        nm_setting_vpn_foreach_secret(vpn, collect_data, &items.secrets);
    }
    const ed::FormValues form = ed::form_from_items(items);
    impl.loading = true;
    impl.grid = gtk_grid_new();
    g_object_ref_sink(impl.grid);
    gtk_grid_set_row_spacing(GTK_GRID(impl.grid), 6);
    gtk_grid_set_column_spacing(GTK_GRID(impl.grid), 12);
    gtk_widget_set_margin_start(impl.grid, 12);
    gtk_widget_set_margin_end(impl.grid, 12);
    gtk_widget_set_margin_top(impl.grid, 12);
    gtk_widget_set_margin_bottom(impl.grid, 12);
    int y = 0;
    for (const ed::Field& f : ed::fields()) {
        Row row{&f, nullptr, nullptr};
        const std::string value = form.get(f.key);
        GtkWidget* label = nullptr;
        if (f.kind == ed::Kind::boolean) {
            row.input = gtk_check_button_new_with_label(f.label);
            set_check_active(row.input, value == "yes");
            g_signal_connect(row.input, "toggled", G_CALLBACK(on_changed), self);
            gtk_grid_attach(GTK_GRID(impl.grid), row.input, 1, y, 2, 1);
        } else {
            label = gtk_label_new(f.label);
            gtk_label_set_xalign(GTK_LABEL(label), 1.0f);
            gtk_grid_attach(GTK_GRID(impl.grid), label, 0, y, 1, 1);
            if (f.kind == ed::Kind::choice) {
                row.input = combo(f.choices, value);
            } else {
                row.input = gtk_entry_new();
                set_entry_text(row.input, value);
                gtk_entry_set_placeholder_text(GTK_ENTRY(row.input), f.hint);
                if (f.kind == ed::Kind::number) gtk_entry_set_input_purpose(GTK_ENTRY(row.input), GTK_INPUT_PURPOSE_DIGITS);
                if (f.kind == ed::Kind::secret) {
                    // Beside its storage drop-down the entry got what that left over: a
                    // few characters in GNOME Settings' dialog. A width in characters
                    // follows the desktop's font and scale.
#if GTK_MAJOR_VERSION >= 4
                    gtk_editable_set_width_chars(GTK_EDITABLE(row.input), 20);
#else
                    gtk_entry_set_width_chars(GTK_ENTRY(row.input), 20);
#endif
                    gtk_entry_set_visibility(GTK_ENTRY(row.input), FALSE);
                    gtk_entry_set_input_purpose(GTK_ENTRY(row.input), GTK_INPUT_PURPOSE_PASSWORD);
                }
            }
            gtk_widget_set_hexpand(row.input, TRUE);
            g_signal_connect(row.input, "changed", G_CALLBACK(on_changed), self);
            gtk_label_set_mnemonic_widget(GTK_LABEL(label), row.input);
            if (f.kind == ed::Kind::secret) {
                auto flags = form.secret_flags.find(f.key);
                row.storage = combo(f.choices, std::to_string(flags == form.secret_flags.end() ? 0u : flags->second));
                g_signal_connect(row.storage, "changed", G_CALLBACK(on_changed), self);
                const std::string name = std::string(f.label) + " storage";
                set_accessible(row.storage, name.c_str(), "where the secret is kept");
                gtk_grid_attach(GTK_GRID(impl.grid), row.input, 1, y, 1, 1);
                gtk_grid_attach(GTK_GRID(impl.grid), row.storage, 2, y, 1, 1);
            } else {
                gtk_grid_attach(GTK_GRID(impl.grid), row.input, 1, y, 2, 1);
            }
        }
        set_accessible(row.input, f.label, f.hint);
        impl.rows.push_back(row);
        ++y;
        if (std::string_view(f.key) == "no_cookie_cache") {
            impl.forget = gtk_button_new_with_label("Forget saved sign-in");
            gtk_widget_set_tooltip_text(impl.forget, "remove the GlobalProtect portal cookie this profile's logins "
                                                     "saved: the next connection signs in afresh");
            g_signal_connect(impl.forget, "clicked", G_CALLBACK(on_forget), self);
            gtk_widget_set_halign(impl.forget, GTK_ALIGN_START);
            gtk_grid_attach(GTK_GRID(impl.grid), impl.forget, 1, y++, 2, 1);
        }
    }
    impl.message = gtk_label_new("");
    gtk_label_set_xalign(GTK_LABEL(impl.message), 0.0f);
#if GTK_MAJOR_VERSION >= 4
    gtk_label_set_wrap(GTK_LABEL(impl.message), TRUE);
#else
    gtk_label_set_line_wrap(GTK_LABEL(impl.message), TRUE);
#endif
    gtk_grid_attach(GTK_GRID(impl.grid), impl.message, 0, y, 3, 1);
#if GTK_MAJOR_VERSION < 4
    gtk_widget_show_all(impl.grid);
#endif
    show_validity(impl, form);
    impl.loading = false;
}

}  // namespace

extern "C" {

static void espvpn_editor_init(EspvpnEditor* self) { self->impl = new Impl(); }

static void espvpn_editor_dispose(GObject* object) {
    EspvpnEditor* self = self_of(object);
    if (self->impl && self->impl->grid) {
        for (const Row& row : self->impl->rows) {
            g_signal_handlers_disconnect_by_data(row.input, self);
            if (row.storage) g_signal_handlers_disconnect_by_data(row.storage, self);
        }
        if (self->impl->forget) g_signal_handlers_disconnect_by_data(self->impl->forget, self);
        g_clear_object(&self->impl->grid);
    }
    G_OBJECT_CLASS(espvpn_editor_parent_class)->dispose(object);
}

static void espvpn_editor_finalize(GObject* object) {
    delete self_of(object)->impl;
    G_OBJECT_CLASS(espvpn_editor_parent_class)->finalize(object);
}

static void espvpn_editor_class_init(EspvpnEditorClass* klass) {
    G_OBJECT_CLASS(klass)->dispose = espvpn_editor_dispose;
    G_OBJECT_CLASS(klass)->finalize = espvpn_editor_finalize;
}

static void espvpn_editor_iface_init(NMVpnEditorInterface* iface) {
    iface->get_widget = get_widget;
    iface->update_connection = update_connection;
}

// Called by libnm-vpn-plugin-espvpn.so's get_editor (editor_plugin.cpp).
__attribute__((visibility("default"))) NMVpnEditor* nm_vpn_editor_factory_espvpn(NMVpnEditorPlugin*, NMConnection* connection,
                                                           GError** error) {
    if (error) g_return_val_if_fail(*error == nullptr, nullptr);
    auto* self = self_of(g_object_new(espvpn_editor_get_type(), nullptr));
    build_form(self, connection);
    return NM_VPN_EDITOR(self);
}

}  // extern "C"
