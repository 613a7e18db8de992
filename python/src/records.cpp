#include "records.h"

namespace nb = nanobind;

namespace {

nb::tuple fields_of_class(nb::handle cls) {
  nb::object fields = cls.attr("_fields");
  return nb::borrow<nb::tuple>(fields);
}

nb::tuple fields_of(nb::handle record) { return fields_of_class(record.type()); }

// A field's value as _asdict() gives it: records as dicts, tuples item by item.
nb::object plain(nb::handle value) {
  if (nb::hasattr(value.type(), "_fields") && nb::hasattr(value, "_asdict")) return value.attr("_asdict")();
  if (nb::isinstance<nb::tuple>(value)) {
    nb::list items;
    for (nb::handle item : nb::borrow<nb::tuple>(value)) items.append(plain(item));
    return nb::tuple(items);
  }
  return nb::borrow(value);
}

}  // namespace

nb::str record_repr(nb::handle self) {
  std::string text = nb::cast<std::string>(self.type().attr("__name__")) + "(";
  const char* separator = "";
  for (nb::handle name : fields_of(self)) {
    text += separator + nb::cast<std::string>(name) + "=" + nb::cast<std::string>(nb::repr(nb::getattr(self, name)));
    separator = ", ";
  }
  return nb::str((text + ")").c_str());
}

nb::object record_eq(nb::handle self, nb::handle other) {
  if (!other.type().is(self.type())) return nb::borrow(Py_NotImplemented);
  for (nb::handle name : fields_of(self)) {
    if (!nb::getattr(self, name).equal(nb::getattr(other, name))) return nb::borrow(Py_False);
  }
  return nb::borrow(Py_True);
}

Py_ssize_t record_hash(nb::handle self) {
  nb::list values;
  for (nb::handle name : fields_of(self)) values.append(nb::getattr(self, name));
  return nb::hash(nb::tuple(values));
}

nb::dict record_asdict(nb::handle self) {
  nb::dict out;
  for (nb::handle name : fields_of(self)) out[name] = plain(nb::getattr(self, name));
  return out;
}

void add_record_field(nb::handle cls, const char* name) {
  nb::list fields;
  for (nb::handle known : fields_of_class(cls)) fields.append(known);
  fields.append(nb::str(name));
  nb::setattr(cls, "_fields", nb::tuple(fields));
}
