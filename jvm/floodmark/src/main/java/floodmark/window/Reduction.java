package floodmark.window;

/**
 * How one numeric accumulator is made from records and combined ({@code Reduction} in
 * {@code floodmark/core/aggregates.py}). Every accumulator is a double: counts stay exact up to 2**53.
 *
 * <p>{@link #empty} is a window without records and the identity of {@link #merge}: 0 for count and sum, NaN
 * ("none yet") for min and max, which lose against any number (numpy's {@code fmin} / {@code fmax}).
 */
public enum Reduction {
  COUNT,
  SUM,
  MIN,
  MAX;

  public double empty() {
    return this == MIN || this == MAX ? Double.NaN : 0.0;
  }

  public boolean readsValues() {
    return this != COUNT;
  }

  /** One record's own accumulator ({@code value} is ignored by count). */
  public double of(double value) {
    return this == COUNT ? 1.0 : value;
  }

  public double merge(double state, double incoming) {
    switch (this) {
      case MIN:
        return Double.isNaN(state) ? incoming : Double.isNaN(incoming) ? state : Math.min(state, incoming);
      case MAX:
        return Double.isNaN(state) ? incoming : Double.isNaN(incoming) ? state : Math.max(state, incoming);
      default:
        return state + incoming;
    }
  }
}
