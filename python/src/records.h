// C++ records (the structs of values the API returns: statistics, reports,
// descriptions) as Python classes with the manners of frozen dataclasses,
// so that each record is defined once, in its C++ header: read-only fields
// in declaration order (listed in `_fields`), __repr__, __eq__ and __hash__
// over those fields, and _asdict() (nested records and tuples of them
// converted too, as dataclasses.asdict does).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

nanobind::str record_repr(nanobind::handle self);
nanobind::object record_eq(nanobind::handle self, nanobind::handle other);
Py_ssize_t record_hash(nanobind::handle self);
nanobind::dict record_asdict(nanobind::handle self);
// Appends `name` to `cls._fields`.
void add_record_field(nanobind::handle cls, const char* name);

template <class T>
class Record {
 public:
  Record(nanobind::handle scope, const char* name, const char* doc) : class_(scope, name, doc) {
    class_.attr("_fields") = nanobind::tuple();
    class_.def("__repr__", &record_repr)
        .def("__eq__", &record_eq, nanobind::arg("other").none())
        .def("__hash__", &record_hash)
        .def("_asdict", &record_asdict, "The fields as a dict, nested records as dicts too.");
  }

  // A field as C++ holds it: a number, a string, a bool, a record, an
  // optional record (None when absent).
  template <class C, class D>
  Record& field(const char* name, D C::*member, const char* doc) {
    class_.def_ro(name, member, doc);
    add_record_field(class_, name);
    return *this;
  }

  // A field Python sees converted by `get(const T&)`: None for what C++
  // marks as not set (-1, ""), a tuple for a vector, a name for an enum.
  template <class Get>
  Record& converted(const char* name, Get&& get, const char* doc) {
    class_.def_prop_ro(name, std::forward<Get>(get), doc);
    add_record_field(class_, name);
    return *this;
  }

  // For what is no field: methods, derived properties, constructors.
  nanobind::class_<T>& cls() { return class_; }

 private:
  nanobind::class_<T> class_;
};

// The conversions of Record::converted.
template <class Item>
nanobind::tuple as_tuple(const std::vector<Item>& items) {
  nanobind::list out;
  for (const Item& item : items) out.append(nanobind::cast(item, nanobind::rv_policy::copy));
  return nanobind::tuple(out);
}

inline std::optional<std::string> none_if_empty(const std::string& text) {
  return text.empty() ? std::nullopt : std::optional<std::string>(text);
}

template <class Number>
std::optional<Number> none_if_negative(Number value) {
  return value < 0 ? std::nullopt : std::optional<Number>(value);
}

inline nanobind::bytes as_bytes(const std::vector<std::byte>& data) {
  return nanobind::bytes(data.data(), data.size());
}
