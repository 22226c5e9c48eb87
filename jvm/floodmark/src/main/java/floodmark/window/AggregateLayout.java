package floodmark.window;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * An aggregate in columnar form ({@code ColumnarLayout} in {@code floodmark/core/aggregates.py}): the numeric
 * accumulators of every part and how each part's result comes from them.
 *
 * <p>Parts are count, sum, min, max and mean (a sum and a count). A window's accumulators are one {@code
 * double[]} in {@link #columns}' order; {@link #fields} are the record fields some accumulator reads, each once
 * (a record's values come in that order: {@code ColumnarLayout.value_fields}'s).
 */
public final class AggregateLayout {
  /** One part: its name ({@code "value"} for a single aggregate), kind and the accumulators it reads. */
  public record Part(String name, String kind, String field, int[] columns) {}

  /** One accumulator: its reduction and the index of the field it reduces in {@link #fields} (-1: count). */
  public record Column(Reduction reduction, int field) {}

  public final boolean single;
  public final List<Part> parts = new ArrayList<>();
  public final List<Column> columns = new ArrayList<>();
  public final List<String> fields = new ArrayList<>();

  /**
   * How a bad record's reason names each of {@link #fields} ({@code value}, or {@code field 'fare'}), as the Python
   * core writes it ({@code floodmark.core.assign.field_label}) and the spec form carries it: written once, there.
   */
  public final List<String> labels = new ArrayList<>();

  /**
   * @param single the aggregate is one part, not {@code several}: a pane's value is that part's result
   * @param parts name -> {kind, field, label} in order; kind is count, sum, min, max or mean; field null means the
   *     record's value; label is how a reason names the field
   */
  public AggregateLayout(boolean single, Map<String, String[]> parts) {
    this.single = single;
    for (Map.Entry<String, String[]> entry : parts.entrySet()) {
      String kind = entry.getValue()[0];
      String field = entry.getValue()[1];
      String label = entry.getValue()[2];
      List<Reduction> reductions =
          switch (kind) {
            case "count" -> List.of(Reduction.COUNT);
            case "sum" -> List.of(Reduction.SUM);
            case "min" -> List.of(Reduction.MIN);
            case "max" -> List.of(Reduction.MAX);
            case "mean" -> List.of(Reduction.SUM, Reduction.COUNT);
            default -> throw new IllegalArgumentException("no built-in aggregate " + kind);
          };
      int[] indices = new int[reductions.size()];
      for (int i = 0; i < indices.length; i++) {
        Reduction reduction = reductions.get(i);
        int fieldIndex = -1;
        if (reduction.readsValues()) {
          fieldIndex = fields.indexOf(field);
          if (fieldIndex < 0) {
            fields.add(field);
            labels.add(label);
            fieldIndex = fields.size() - 1;
          }
        }
        indices[i] = columns.size();
        columns.add(new Column(reduction, fieldIndex));
      }
      this.parts.add(new Part(entry.getKey(), kind, field, indices));
    }
  }

  public double[] empty() {
    double[] acc = new double[columns.size()];
    reset(acc);
    return acc;
  }

  /** Restarts {@code acc} empty, in place (a DISCARDING pane). */
  public void reset(double[] acc) {
    for (int i = 0; i < acc.length; i++) {
      acc[i] = columns.get(i).reduction().empty();
    }
  }

  /** One record's own accumulators ({@code values} in {@link #fields}' order). */
  public double[] of(double[] values) {
    double[] acc = new double[columns.size()];
    for (int i = 0; i < acc.length; i++) {
      Column column = columns.get(i);
      acc[i] = column.reduction().of(column.field() < 0 ? 0.0 : values[column.field()]);
    }
    return acc;
  }

  /** Folds {@code incoming} into {@code state}, in place. */
  public void merge(double[] state, double[] incoming) {
    merge(state, 0, incoming, 0);
  }

  /**
   * Folds the accumulators at {@code incoming[from ..]} into {@code state[at ..]}, in place (columnar rows: one
   * row's accumulators follow each other).
   */
  public void merge(double[] state, int at, double[] incoming, int from) {
    for (int i = 0; i < columns.size(); i++) {
      state[at + i] = columns.get(i).reduction().merge(state[at + i], incoming[from + i]);
    }
  }

  /**
   * Each part's result, in {@link #parts}' order: a count as a long, a sum as a double, min, max and mean as a
   * double or null (an empty pane's). An array, not a map by name: a flush makes one per pane.
   */
  public Object[] results(double[] acc) {
    Object[] out = new Object[parts.size()];
    for (int i = 0; i < out.length; i++) {
      Part part = parts.get(i);
      double first = acc[part.columns()[0]];
      Object result =
          switch (part.kind()) {
            case "count" -> (long) first;
            case "sum" -> first;
            case "mean" -> acc[part.columns()[1]] > 0 ? first / acc[part.columns()[1]] : null;
            default -> Double.isNaN(first) ? null : first;
          };
      out[i] = result;
    }
    return out;
  }
}
